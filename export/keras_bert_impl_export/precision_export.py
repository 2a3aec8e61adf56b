"""A model's SavedModels with calls that run it in a precision: what `kbert serve` builds from a
run folder, and bench/perf/serve_load.py's in-process model.

What runs at a precision and runtime is `ForwardResolver`'s to say. bf16 exports its bfloat16
copy. int8 is not a SavedModel (TFLite's dynamic-range int8 on XNNPACK, `LiteRtForward`; a
`kbert finetune --qat` model's integer-only file, `IntegerFileForward`): the SavedModels are
fp32's, for their signatures and metadata, and each call runs the same tokenization and
post-processing (`ExportSignatures`) around the int8 forward pass in their place; fp32 on litert
does the same with the float32 conversion, and a QAT model at fp32 with its fake-quantized
forward (its SavedModels are its float classifier's).
"""

import sys
import threading

import numpy as np

from keras_bert_impl.inference import LiteRtForward
from keras_bert_impl.inference.id_checks import check_id_arrays
from keras_bert_impl.models import QuantizationAwareClassifier
from keras_bert_impl.precisions import LITERT_QUANTIZATION
from keras_bert_impl.tensor_names import EXPORT_TO_MODEL_ID_INPUTS, MODEL_ID_INPUTS, SERVING_ENDPOINT
from keras_bert_impl_export.export_signatures import ExportSignatures
from keras_bert_impl_export.exporter import export_model


def _stderr(line):
    print(line, file=sys.stderr, flush=True)


def export_in_precision(resolved, output, *, name, seq_len, pair=False, log=_stderr):
    """Writes `resolved.model`'s SavedModels in `output` (what `kbert export --formats
    saved_model` writes, in `resolved`'s precision) and returns {servable name: {signature:
    function}} to give `ServableModel` where the calls run something else than those SavedModels'
    graphs (else {}).

    Args:
        resolved: a `ForwardResolver` of the model at the precision and runtime asked for.
        output: the folder to create.
        name: the servable's name (NAME and NAME_ids, exporter.py's layout).
        seq_len, pair: see `ExportSignatures`.
        log: where the progress lines go.

    Raises `ConversionError` (a `ValueError`) where TFLite cannot convert the model, and what
    `export_model` raises."""
    functions = {}
    if resolved.runs != "keras" or resolved.quantization_aware:
        log(f"{_what_runs(resolved)}: the SavedModels' calls run it")
        functions = servable_functions(resolved.model, name, seq_len, pair, resolved.forward(seq_len))
    log(f"exporting {name!r} (the SavedModels kbert export writes, {resolved.precision})")
    export_model(
        resolved.model_in_precision(),
        output,
        name=name,
        sequence_length=seq_len,
        pair=pair,
        formats=("saved_model",),
        log=log,
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
    return servable_functions(model, name, seq_len, pair, LiteRtForward(model, quantization=quantization))


def servable_functions(model, name, seq_len, pair, litert):
    """{servable name: {"serving_default": function}}: the raw-text and id signatures of the
    export's NAME and NAME_ids SavedModels (exporter.py's layout), each the same tokenization and
    post-processing around `litert` (`(token_ids, segment_ids, padding_mask) -> outputs`: an
    `LiteRtForward`, a QAT model's `IntegerFileForward`, or `ForwardResolver.forward`'s
    `tf.function`), called eagerly. A QuantizationAwareClassifier's signatures are its float
    classifier's, as its export's are."""
    if isinstance(model, QuantizationAwareClassifier):  # its float head's signatures, as its export's
        model = model.classifier
    signatures = ExportSignatures(model, seq_len, pair=pair, forward=_checked_forward(model, litert))
    return {
        name: {SERVING_ENDPOINT: signatures.endpoint(text=True)[0]},
        f"{name}_ids": {SERVING_ENDPOINT: signatures.endpoint(text=False, checked=False)[0]},
    }  # forward checks


def _checked_forward(model, litert):
    """`litert` on a signature's id inputs: checked, one call at a time, cut to the columns used."""
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
