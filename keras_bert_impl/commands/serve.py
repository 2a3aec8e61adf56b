"""`kbert serve`: a local server with TF Serving's REST API over an export or a run folder.

The server is keras_bert_lite's (`keras_bert_lite.serve.model_server`); this module reads
the flags, turns a run folder into the SavedModels `kbert export` would write (through its
`load_for_export` and the wing's `precision_export`, into a temporary folder), and imports the
wing lazily.

`--precision`: what a run folder's model runs at is `ForwardResolver`'s to say (or refuse, in one
line, before anything is written); `precision_export` builds it (bf16 a SavedModel computing in
bfloat16, int8 and `--runtime litert` calls around a LiteRT forward in fp32's SavedModels). An
export folder's SavedModels run as they were written.
"""

import argparse
import math
import os
import re
import shutil
import sys
import tempfile

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command, positive_int
from keras_bert_impl.commands.precision_flag import add_precision_flag

EXPORT_MANIFEST = "export.json"  # what makes a folder a `kbert export` folder

_NAME = re.compile(r"[A-Za-z0-9._-]+")


_HELP = "Serve an export (or a run folder) over TF Serving's REST API, with dynamic batching."
_DESCRIPTION = (
    "Answer GET /v1/models/NAME[/versions/N][/metadata] and POST /v1/models/NAME[/versions/N]:predict "
    "with TF Serving's request and response bodies (instances or inputs), batching concurrent requests, "
    "with /healthz and Prometheus metrics at /monitoring/prometheus/metrics. SIGTERM or Ctrl-C: stop "
    "accepting connections, answer every accepted request, exit 0. Clients written against it run "
    "unchanged against TF Serving serving the same export."
)
# (flag, add_argument keywords), in `--help`'s order.
_FLAG_TABLE = (
    (
        "--model",
        dict(
            required=True,
            action="append",
            help="A kbert export folder (every model under its serving/), a model folder with numbered "
            "versions, a SavedModel folder, or a kbert finetune run folder (exported on start-up). "
            "Repeated: LoRA runs (kbert finetune --lora-rank) of one base model, each served under its "
            "folder's name from one backbone in memory.",
        ),
    ),
    (
        "--name",
        dict(
            default=None,
            help="Model name in the URLs for a run, a version folder or a SavedModel (letters, digits, "
            "'.', '_', '-'). Default: the folder's name; an export keeps its own names.",
        ),
    ),
    (
        "--host",
        dict(default="127.0.0.1", help="Address to listen on. Default 127.0.0.1 (this machine only)."),
    ),
    (
        "--port",
        dict(type=int, default=8501, help="TF Serving's REST port by default (8501); 0 picks a free one."),
    ),
    ("--max-batch-size", dict(type=positive_int, default=32, help="Rows per model call. Default 32.")),
    (
        "--batch-timeout-ms",
        dict(
            type=float,
            default=2.0,
            help="Milliseconds a batch that is not full waits for more requests (a finite number >= 0). "
            "Default 2.",
        ),
    ),
    ("--num-batch-threads", dict(type=positive_int, default=1, help="Model calls at once. Default 1.")),
    (
        "--max-enqueued-batches",
        dict(
            type=positive_int,
            default=1000,
            help="Queue bound, in batches of --max-batch-size rows: a request that finds it full gets 503, "
            "one with more rows than it holds gets 400. Default 1000.",
        ),
    ),
    (
        "--max-body-bytes",
        dict(
            type=positive_int,
            default=16 * 1024 * 1024,
            help="Largest request body; a larger one gets 413. Default 16 MiB.",
        ),
    ),
    (
        "--seq-len",
        dict(
            type=int,
            default=None,
            help="For a run folder: tokens per text (default: the run's training --seq-len). An export "
            "keeps the length it was exported with.",
        ),
    ),
)


def add_parser(subparsers):
    parser = add_command(subparsers, "serve", run, _HELP, _DESCRIPTION, _FLAG_TABLE)
    add_precision_flag(parser)
    # cli.main loads TensorFlow before a command, except to serve an export's .tflite on LiteRT.
    parser.set_defaults(without_tensorflow=_serves_tflite)
    return parser


def _serves_tflite(args):
    """Whether one export folder is served from its .tflite on LiteRT (--runtime litert, or
    --precision int8: its dynamic_int8 file), without TensorFlow (`keras_bert_lite.serve`)."""
    models = args.model if isinstance(args.model, list) else [args.model]
    return (
        len(models) == 1
        and os.path.isfile(os.path.join(models[0], EXPORT_MANIFEST))
        and (args.runtime == "litert" or args.precision == "int8")
    )


def _log(line):
    print(f"kbert serve: {line.strip()}", file=sys.stderr, flush=True)


def _check_flags(args):
    if args.port < 0:
        raise UsageError(f"--port must be at least 0. Received: {args.port}")
    if args.port > 65535:
        raise UsageError(f"--port must be at most 65535. Received: {args.port}")
    # inf made every request smaller than a batch wait forever; NaN was taken as 0 without a word.
    if not 0 <= args.batch_timeout_ms < math.inf:
        raise UsageError(
            f"--batch-timeout-ms must be a finite number >= 0 (milliseconds; 0 does not wait). "
            f"Received: {args.batch_timeout_ms}"
        )
    # A name with ':' or '/' gives URLs (/v1/models/mr:v2:predict) that no request can reach.
    if args.name is not None and not _NAME.fullmatch(args.name):
        raise UsageError(
            f"--name must be letters, digits, '.', '_' or '-' (it goes in /v1/models/NAME). "
            f"Received: {args.name!r}"
        )
    if not os.path.exists(args.model):
        raise UsageError(f"--model {args.model!r}: no such file or folder.")


def run(args):
    if len(args.model) > 1:
        return _run_adapters(args)
    serves_tflite = _serves_tflite(args)
    args.model = args.model[0]
    _check_flags(args)
    if serves_tflite:
        return _serve(args, [_tflite_servable(args)])
    temporary = None
    try:
        model_path, functions = args.model, {}
        if os.path.isfile(model_path) or os.path.isfile(os.path.join(model_path, "model.keras")):
            name = args.name or os.path.basename(os.path.normpath(model_path)).removesuffix(".keras")
            temporary = tempfile.mkdtemp(prefix="kbert-serve-")
            model_path = os.path.join(temporary, "export")
            functions = export_in_precision(
                args.model,
                model_path,
                name=name,
                seq_len=args.seq_len,
                precision=args.precision,
                runtime=args.runtime,
            )
        else:
            _check_exported_precision(args)
        return _serve(args, _servable_models(args, model_path, functions))
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


def _serve(args, models):
    from keras_bert_lite.serve.model_server import ModelServer

    server = ModelServer(
        models,
        max_batch_size=args.max_batch_size,
        batch_timeout_ms=args.batch_timeout_ms,
        num_batch_threads=args.num_batch_threads,
        max_enqueued_batches=args.max_enqueued_batches,
        max_body_bytes=args.max_body_bytes,
    )
    status = server.serve(args.host, args.port, on_ready=lambda port: _print_urls(args, models, port))
    dropped = f", {server.dropped} dropped (their clients left first)" if server.dropped else ""
    _log(f"stopped: {server.accepted} predict requests accepted, {server.answered} answered{dropped}")
    return status


def _check_adapter_flags(args):
    """Several --model: LoRA run folders (or .keras files), served at fp32 on Keras under their
    folders' names."""
    checks = (
        (
            args.name is not None,
            f"--name {args.name!r} names one model; with several --model each is "
            "served under its folder's name: leave --name out.",
        ),
        (
            args.precision in ("bf16", "int8"),
            f"--precision {args.precision}: several --model (LoRA adapters over one backbone) run fp32 on "
            "Keras: leave --precision out, or serve one run alone (one --model) at it.",
        ),
        (
            args.runtime == "litert",
            "--runtime litert: several --model (LoRA adapters over one backbone) run fp32 on Keras: leave "
            "--runtime out, or serve one run alone (one --model) on it.",
        ),
    )
    for failed, message in checks:
        if failed:
            raise UsageError(message)
    names = [_adapter_name(path) for path in args.model]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise UsageError(
            f"--model: {len(args.model)} folders, but {repeated[0]!r} names more than one: each is served "
            "under its folder's name, so give the runs folders of different names."
        )
    return names


def _adapter_name(path):
    name = os.path.basename(os.path.normpath(path)).removesuffix(".keras")
    if not os.path.isfile(path) and not os.path.isfile(os.path.join(path, "model.keras")):
        raise UsageError(
            f"--model {path!r}: no kbert finetune run folder or .keras file there; several --model serve "
            "LoRA runs of one base (kbert finetune --lora-rank), each a run folder."
        )
    if not _NAME.fullmatch(name):
        raise UsageError(
            f"--model {path!r}: its name {name!r} goes in /v1/models/NAME, which takes letters, digits, "
            "'.', '_' or '-': rename the folder."
        )
    return name


def _run_adapters(args):
    """Several LoRA runs of one base, each its own model over one backbone (the wing's
    `adapter_servables`)."""
    _check_flags(argparse.Namespace(**{**vars(args), "model": args.model[0], "name": None}))
    names = _check_adapter_flags(args)
    if args.precision == "auto":  # what auto picks for one run (int8, bf16) the adapters do not run
        _log("--precision auto: fp32 (several --model: LoRA adapters over one backbone run fp32 on Keras)")
    from keras_bert_impl_export.serve.lora_adapters import adapter_servables

    temporary = tempfile.mkdtemp(prefix="kbert-serve-")
    try:
        runs = (_load_adapter(name, path, args.seq_len) for name, path in zip(names, args.model))
        try:
            models = adapter_servables(runs, os.path.join(temporary, "adapters"), log=_log)
        except UsageError:  # a run's own (loading it), already one line
            raise
        except ValueError as e:  # adapters of different bases, a run without LoRA: one line
            raise UsageError(f"--model: {e}") from None
        return _serve(args, models)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _load_adapter(name, path, seq_len):
    """(name, the run's LoRA classifier unmerged, its sequence length, pair)."""
    from keras_bert_impl.commands import task_data
    from keras_bert_impl.commands.model_files import load_model, run_sequence_length

    _log(f"loading {name} from {path}")
    model, model_path = load_model(path)
    stored = task_data.read_task_file(os.path.dirname(model_path)) or {}
    backbone = getattr(model, "backbone", model)
    if not getattr(backbone, "lora_settings", None):
        raise UsageError(
            f"--model {path!r} has no LoRA adapters: several --model serve LoRA runs of one base "
            "(kbert finetune --lora-rank); serve a full fine-tune alone, with one --model."
        )
    return name, model, run_sequence_length(seq_len, stored, backbone), stored.get("task") == "pair"


def _servable_models(args, model_path, functions):
    from keras_bert_impl_export.serve.servable_model import ServableModel, find_servables

    try:
        models = []
        for name, version, path in find_servables(model_path, args.name):
            _log(f"loading {name} version {version} from {path}")
            models.append(ServableModel(name, version, path, functions=functions.get(name)))
            unbatched = sorted(s for s, batch_major in models[-1].batch_major.items() if not batch_major)
            if unbatched:
                _log(
                    f"{name} signature(s) {', '.join(unbatched)}: an input or output has no batch dimension "
                    "first, so their requests run alone, neither merged nor split"
                )
    except ValueError as e:  # no SavedModel there, one without a signature: one line
        raise UsageError(str(e)) from None
    return models


def _print_urls(args, models, port):
    host = f"[{args.host}]" if ":" in args.host else args.host
    for model in models:
        print(
            f"Serving {model.name} (version {model.version}) at http://{host}:{port}/v1/models/{model.name}",
            flush=True,
        )


def _tflite_servable(args):
    """The export's raw-text model on LiteRT: its float32 file at fp32, dynamic_int8 at int8."""
    from keras_bert_lite.serve.lite_servable import LiteServable

    quantization = {"fp32": "float32", "int8": "dynamic_int8"}.get(args.precision)
    if quantization is None or args.runtime == "tensorflow":
        raise UsageError(
            f"--model {args.model} is served from its .tflite files on litert at --precision fp32 or int8 "
            f"(received --precision {args.precision}, --runtime {args.runtime}): pass one of those and no "
            "--runtime tensorflow, or leave --runtime and --precision out to serve its SavedModels."
        )
    if args.seq_len is not None:
        raise UsageError(
            f"--seq-len {args.seq_len} applies to a run folder or .keras file; --model {args.model} is an "
            "export, which keeps the length it was exported with: leave --seq-len out."
        )
    try:
        servable = LiteServable(args.model, quantization)
    except ValueError as e:  # not a classifier's export, no such file in it: one line
        raise UsageError(f"--model {args.model}: {e}") from None
    _log(
        f"loading {servable.name} version 1 from its {quantization} .tflite on LiteRT (the raw-text "
        "model; the folder's SavedModels, its id model among them, are served on TensorFlow without "
        "--runtime litert)"
    )
    return servable


def _check_exported_precision(args):
    """An export's (or a SavedModel's) SavedModels run as they were written: bf16 and int8 are
    made from the Keras model (an export's int8 and litert are its .tflite files: `_serves_tflite`),
    auto says it keeps them."""
    if args.runtime == "litert":
        raise UsageError(
            "--runtime litert needs the Keras model: pass the run folder or .keras file, or a kbert "
            f"export folder for its .tflite files (--model {args.model} holds SavedModels, which run on "
            "TensorFlow as they were exported), or leave --runtime out."
        )
    if args.precision in ("bf16", "int8"):
        raise UsageError(
            f"--precision {args.precision} needs the Keras model: pass the run folder or .keras file "
            f"(--model {args.model} holds SavedModels, which run as they were exported), or leave "
            "--precision out."
        )
    if args.seq_len is not None:
        raise UsageError(
            f"--seq-len {args.seq_len} applies to a run folder or .keras file (exported on start-up); "
            f"--model {args.model} holds SavedModels, which take the length they were exported with: leave "
            "--seq-len out."
        )
    if args.precision == "auto":
        _log("--precision auto: fp32, the SavedModels as they were exported (a run folder lets auto choose)")


def export_in_precision(model_flag, output, *, name, seq_len=None, precision="fp32", runtime=None, log=None):
    """A run folder's (or .keras file's) SavedModels in `output` and the servable functions that
    run them at `precision` and `runtime` (the wing's `export_in_precision`), once
    `ForwardResolver` has said what runs there; its refusals and the conversion's are one line
    (UsageError). `log`: where the progress lines go (default: stderr, as kbert serve's)."""
    from keras_bert_impl.commands.export import load_for_export
    from keras_bert_impl.commands.inference_setup import resolve_flags
    from keras_bert_impl_export.exporter import ExportExistsError
    from keras_bert_impl_export.precision_export import export_in_precision as export

    model, _, _, task, pair, seq_len = load_for_export(model_flag, seq_len)
    pair = pair and task == "pair"
    resolved = resolve_flags(
        argparse.Namespace(precision=precision, runtime=runtime, command="serve"), model, task
    )
    try:
        return export(resolved, output, name=name, seq_len=seq_len, pair=pair, log=log or _log)
    except (ExportExistsError, ValueError) as e:  # a ConversionError is a ValueError
        raise UsageError(str(e)) from None
