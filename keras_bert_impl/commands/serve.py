"""`kbert serve`: a local server with TF Serving's REST API over an export or a run folder.

The server is the export wing's (`keras_bert_impl_export.serve.model_server`); this module reads
the flags, turns a run folder into the SavedModels `kbert export` would write (through its
`export_saved_models`, into a temporary folder), and imports the wing lazily.
"""

import os
import shutil
import sys
import tempfile

from keras_bert_impl.commands.errors import UsageError


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "serve",
        help="Serve an export (or a run folder) over TF Serving's REST API, with dynamic batching.",
        description="Answer GET /v1/models/NAME[/versions/N][/metadata] and POST /v1/models/NAME[/versions/N]:predict "
        "with TF Serving's request and response bodies (instances or inputs), batching concurrent requests, "
        "with /healthz and Prometheus metrics at /monitoring/prometheus/metrics. SIGTERM or Ctrl-C: stop "
        "accepting connections, answer every accepted request, exit 0. Clients written against it run "
        "unchanged against TF Serving serving the same export.",
    )
    parser.add_argument("--model", required=True,
                        help="A kbert export folder (every model under its serving/), a model folder with numbered "
                        "versions, a SavedModel folder, or a kbert finetune run folder (exported on start-up).")
    parser.add_argument("--name", default=None,
                        help="Model name in the URLs for a run, a version folder or a SavedModel. Default: the "
                        "folder's name; an export keeps its own names.")
    parser.add_argument("--host", default="127.0.0.1", help="Address to listen on. Default 127.0.0.1 (this machine only).")
    parser.add_argument("--port", type=int, default=8501, help="TF Serving's REST port by default (8501); 0 picks a free one.")
    parser.add_argument("--max-batch-size", type=int, default=32, help="Rows per model call. Default 32.")
    parser.add_argument("--batch-timeout-ms", type=float, default=2.0,
                        help="How long a batch that is not full waits for more requests. Default 2.")
    parser.add_argument("--num-batch-threads", type=int, default=1, help="Model calls at once. Default 1.")
    parser.add_argument("--max-enqueued-batches", type=int, default=1000,
                        help="Queue bound, in batches of --max-batch-size rows; beyond it a request gets 503. Default 1000.")
    parser.add_argument("--max-body-bytes", type=int, default=16 * 1024 * 1024,
                        help="Largest request body; a larger one gets 413. Default 16 MiB.")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="For a run folder: tokens per text (default: the run's training --seq-len).")
    parser.set_defaults(func=run)
    return parser


def _check_positive(flag, value, minimum=1):
    if value < minimum:
        raise UsageError(f"{flag} must be at least {minimum}. Received: {value}")


def run(args):
    for flag, value in (("--max-batch-size", args.max_batch_size), ("--num-batch-threads", args.num_batch_threads),
                        ("--max-enqueued-batches", args.max_enqueued_batches), ("--max-body-bytes", args.max_body_bytes)):
        _check_positive(flag, value)
    _check_positive("--port", args.port, minimum=0)
    if args.port > 65535:
        raise UsageError(f"--port must be at most 65535. Received: {args.port}")
    if args.batch_timeout_ms < 0:
        raise UsageError(f"--batch-timeout-ms must be >= 0. Received: {args.batch_timeout_ms}")
    if not os.path.exists(args.model):
        raise UsageError(f"--model {args.model!r}: no such file or folder.")

    from keras_bert_impl.commands.export import export_saved_models
    from keras_bert_impl_export.serve.model_server import ModelServer
    from keras_bert_impl_export.serve.servable_model import ServableModel, find_servables

    def log(line):
        print(f"kbert serve: {line}", file=sys.stderr, flush=True)

    temporary = None
    try:
        model_path = args.model
        if os.path.isfile(model_path) or os.path.isfile(os.path.join(model_path, "model.keras")):
            name = args.name or os.path.basename(os.path.normpath(model_path)).removesuffix(".keras")
            temporary = tempfile.mkdtemp(prefix="kbert-serve-")
            log(f"exporting {model_path} as {name!r} (the SavedModels kbert export writes)")
            model_path = os.path.join(temporary, "export")
            export_saved_models(args.model, model_path, name=name, seq_len=args.seq_len)
        try:
            servables = find_servables(model_path, args.name)
        except ValueError as e:
            raise UsageError(str(e)) from None
        models = []
        for name, version, path in servables:
            log(f"loading {name} version {version} from {path}")
            models.append(ServableModel(name, version, path))
        server = ModelServer(
            models, max_batch_size=args.max_batch_size, batch_timeout_ms=args.batch_timeout_ms,
            num_batch_threads=args.num_batch_threads, max_enqueued_batches=args.max_enqueued_batches,
            max_body_bytes=args.max_body_bytes,
        )

        def ready(port):
            host = f"[{args.host}]" if ":" in args.host else args.host
            for model in models:
                print(f"Serving {model.name} (version {model.version}) at http://{host}:{port}/v1/models/{model.name}",
                      flush=True)

        status = server.serve(args.host, args.port, on_ready=ready)
        log(f"stopped: {server.accepted} predict requests accepted, {server.answered} answered")
        return status
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
