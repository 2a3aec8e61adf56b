"""`kbert serve`: a local server with TF Serving's REST API over an export or a run folder.

The server is the export wing's (`keras_bert_impl_export.serve.model_server`); this module reads
the flags, turns a run folder into the SavedModels `kbert export` would write (through its
`load_for_export` and `write_export`, into a temporary folder), and imports the wing lazily.

`--precision`: what a run folder's model runs at is `ForwardResolver`'s to say (or refuse, in one
line, before anything is written). bf16 is a SavedModel computing in bfloat16. int8 is not a
SavedModel (TFLite's dynamic-range int8 on XNNPACK, `LiteRtForward`; a `kbert finetune --qat`
model's integer-only file, `IntegerFileForward`): the SavedModels are fp32's, for their signatures
and metadata, and each call runs the same tokenization and post-processing (the wing's
`ExportSignatures`) around the int8 forward pass in their place; `--runtime litert` does the same
with the float32 conversion for fp32, and a QAT model at fp32 with its fake-quantized forward (its
SavedModels are its float classifier's). An export folder's SavedModels run as they were written.
"""

import argparse
import math
import os
import re
import shutil
import sys
import tempfile
import threading

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_flags, positive_int
from keras_bert_impl.commands.precision_flag import add_precision_flag
from keras_bert_impl.precisions import LITERT_QUANTIZATION

_NAME = re.compile(r"[A-Za-z0-9._-]+")


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
            help="A kbert export folder (every model under its serving/), a model folder with numbered "
            "versions, a SavedModel folder, or a kbert finetune run folder (exported on start-up).",
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
    parser = subparsers.add_parser(
        "serve",
        help="Serve an export (or a run folder) over TF Serving's REST API, with dynamic batching.",
        description=_DESCRIPTION,
    )
    add_flags(parser, _FLAG_TABLE)
    add_precision_flag(parser)
    parser.set_defaults(func=run)
    return parser


def _log(line):
    print(f"kbert serve: {line}", file=sys.stderr, flush=True)


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
    _check_flags(args)

    from keras_bert_impl_export.serve.model_server import ModelServer

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
        models = _servable_models(args, model_path, functions)
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
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


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


def _check_exported_precision(args):
    """An export's (or a SavedModel's) SavedModels run as they were written: bf16 and int8 are
    made from the Keras model, auto says it keeps them."""
    if args.runtime == "litert":
        raise UsageError(
            "--runtime litert needs the Keras model: pass the run folder or .keras file (--model "
            f"{args.model} holds SavedModels, which run on TensorFlow as they were exported), or leave "
            "--runtime out."
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
    """A run folder's (or .keras file's) SavedModels in `output`, what `kbert export --formats
    saved_model` writes, and {servable name: {signature: function}} to give `ServableModel` where
    the calls run something else than those SavedModels' graphs (else {}). What runs at `precision`
    (fp32, bf16, int8 or auto) and `runtime` is `ForwardResolver`'s to say, before anything is
    written: bf16 exports its bfloat16 copy; int8, and fp32 on litert, run their LiteRT forward in
    the calls of fp32's SavedModels; a QuantizationAwareClassifier's SavedModels are its float
    classifier's (what `kbert export` writes), so its calls run what it trained: its fake-quantized
    forward at fp32, its integer-only file at int8.
    bench/perf/serve_load.py builds its in-process model the same way. `log`: where the progress
    lines go (default: stderr, as kbert serve's)."""
    log = log or _log
    from keras_bert_impl.commands.export import load_for_export, write_export
    from keras_bert_impl.commands.inference_setup import resolve_flags

    model, model_path, _, task, pair, seq_len = load_for_export(model_flag, seq_len)
    pair = pair and task == "pair"
    resolved = resolve_flags(
        argparse.Namespace(precision=precision, runtime=runtime, command="serve"), model, task
    )
    functions = {}
    if resolved.runs != "keras" or resolved.quantization_aware:
        log(f"{_what_runs(resolved)}: the SavedModels' calls run it")
        from keras_bert_impl.conversion.tflite_converter import ConversionError

        try:
            forward = resolved.forward(seq_len)
        except ConversionError as e:
            raise UsageError(str(e)) from None
        functions = servable_functions(model, name, seq_len, pair, forward)
    log(f"exporting {model_path} as {name!r} (the SavedModels kbert export writes, {resolved.precision})")
    write_export(
        resolved.model_in_precision(), output, name=name, seq_len=seq_len, pair=pair, formats=("saved_model",)
    )
    return functions


def _what_runs(resolved):
    if resolved.runs == "integer_file":
        return (
            "converting the quantization-aware model to its integer-only file (int8, its learned ranges, "
            "LiteRT)"
        )
    if resolved.runs == "keras":
        return "running the quantization-aware model's fake-quantized forward (fp32, what it trained)"
    if resolved.precision == "int8":
        return "converting the model to int8 (TFLite dynamic-range on XNNPACK)"
    return "converting the model to TFLite float32 on XNNPACK (--runtime litert)"


def litert_functions(model, name, seq_len, pair, quantization=LITERT_QUANTIZATION["int8"]):
    """`servable_functions` around the model's `LiteRtForward` in `quantization` (dynamic_int8 or
    float32)."""
    from keras_bert_impl.inference import LiteRtForward

    return servable_functions(model, name, seq_len, pair, LiteRtForward(model, quantization=quantization))


def servable_functions(model, name, seq_len, pair, litert):
    """{servable name: {"serving_default": function}}: the raw-text and id signatures of the
    export's NAME and NAME_ids SavedModels (exporter.py's layout), each the same tokenization and
    post-processing around `litert` (`(token_ids, segment_ids, padding_mask) -> outputs`: an
    `LiteRtForward`, a QAT model's `IntegerFileForward`, or `ForwardResolver.forward`'s
    `tf.function`), called eagerly. A QuantizationAwareClassifier's signatures are its float
    classifier's, as its export's are."""
    from keras_bert_impl.tensor_names import SERVING_ENDPOINT
    from keras_bert_impl.models.quantization_aware_classifier import QuantizationAwareClassifier
    from keras_bert_impl_export.export_signatures import ExportSignatures

    if isinstance(model, QuantizationAwareClassifier):  # its float head's signatures, as its export's
        model = model.classifier
    signatures = ExportSignatures(model, seq_len, pair=pair, forward=_checked_forward(model, litert))
    return {
        name: {SERVING_ENDPOINT: signatures.endpoint(text=True)[0]},
        f"{name}_ids": {SERVING_ENDPOINT: signatures.endpoint(text=False, checked=False)[0]},
    }  # forward checks


def _checked_forward(model, litert):
    """`litert` on a signature's id inputs: checked, one call at a time, cut to the columns used."""
    import numpy as np

    from keras_bert_impl.tensor_names import EXPORT_TO_MODEL_ID_INPUTS, MODEL_ID_INPUTS
    from keras_bert_impl.inference.id_checks import check_id_arrays

    # Checked first (check_id_arrays: shapes, width, every value inside its table), bad inputs are
    # a 400 naming the input and value as the client sent them; LiteRT would fail inside the
    # interpreter (a 500) or read past a table without a word.
    backbone = model.backbone
    sizes = {"token_ids": backbone.vocabulary_size, "segment_ids": backbone.num_segments, "padding_mask": 2}
    # The client's names, in the exports' order (ids, mask, segment_ids), as the fp32 graph's checks say them.
    shown_as = {model_name: export for export, model_name in EXPORT_TO_MODEL_ID_INPUTS.items()}
    # One interpreter: with --num-batch-threads above 1 its calls take turns.
    lock = threading.Lock()

    def forward(inputs):
        # The signatures pad every call to the sequence length; attention and pooling ignore
        # padding, so the LiteRT forward runs up to the last column any row uses (not the longest
        # row's count: a client's ids call may pad on the left), as TextPredictor's batches do: the
        # same outputs for a fraction of the work on short texts (serve_load_xeon_int8.json). Not
        # when a row has no unmasked token: it attends to every column it is given, so cut to the
        # other rows' width its answer depended on which clients shared its call.
        ids = {name: np.asarray(inputs[name]) for name in MODEL_ID_INPUTS}  # [B, S] each
        check_id_arrays({name: ids[name] for name in shown_as}, sizes, backbone.max_sequence_length, shown_as)
        used = np.flatnonzero(ids["padding_mask"].any(axis=0))
        every_row_reads = ids["padding_mask"].any(axis=1).all()
        width = int(used[-1]) + 1 if every_row_reads else ids["padding_mask"].shape[1]
        with lock:
            return litert(*(ids[name][:, :width] for name in MODEL_ID_INPUTS))

    return forward
