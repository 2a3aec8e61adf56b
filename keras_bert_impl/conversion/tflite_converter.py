"""The one route from a Keras model to a .tflite: every .tflite the project writes is converted here.

Two entry points, one converter set-up: `convert_endpoint` traces a function (ids or raw text
in) into an ExportArchive and converts it (text-in, MediaPipe, `LiteRtForward`);
`convert_saved_model` converts a SavedModel already on disk (the tflite/ files, from the ids
SavedModel `kbert export` writes anyway). Builtin ops only; custom ops only where the caller
lets tensorflow-text's kernels through (`allow_custom_ops`). Why not Keras' own
`model.export(format="litert")`: docs/decisions.md.

Four precisions for the Keras graph, and two integer-only ones (INTEGER_ONLY_QUANTIZATIONS:
int8 or int16 activations, every op integer) for the graph `integer_only.integer_forward`
writes, which the quantizer takes whole where it leaves parts of the Keras graph float.
The converter's own log lines are held back unless it fails (`native_log.py`). A third
integer-only route, LEARNED_INT8, converts a forward that carries its own int8 ranges as
fake-quantization ops (a `QuantizationAwareClassifier`'s): the converter's quantization-aware
path, no calibration.

The Keras graph's four:

`float32` is the model as trained; `float16` stores the weights in half precision (half the
size, computed in float32); `dynamic_int8` stores the weights in int8 and quantizes
activations on the fly per batch; `int8_mixed` also quantizes activations, with ranges
calibrated on real examples. BERT's activations defeat a plain full-int8 conversion (the
-1e9 attention mask bias, LayerNorm's variance and GELU's outliers share one int8 scale with
ordinary values), so `int8_mixed` quantizes only the op kinds in INT8_MIXED_QUANTIZED_OPS,
minus the nodes in INT8_MIXED_FLOAT_NODES, and keeps the rest float.
"""

import contextlib
import copy
import os
import re
import tempfile

from keras_bert_impl.backend_support import require_tensorflow

tf = require_tensorflow(
    "keras_bert_impl.conversion.tflite_converter (SavedModel and TFLite conversion)",
    "Convert in a TensorFlow process; the .tflite runs anywhere LiteRT does.",
)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_bert_impl.conversion.native_log import native_output_held  # noqa: E402
from keras_bert_impl.conversion.input_contract import (  # noqa: E402
    CALIBRATED_QUANTIZATIONS,
    INTEGER_ONLY_QUANTIZATIONS,
    QUANTIZATIONS,
    STATIC_QUANTIZATIONS,
    check_quantization,
)
from keras_bert_impl.tensor_names import SERVING_ENDPOINT  # noqa: E402

# int8_mixed quantizes the embedding lookups (GATHER) and the fully connected layers not
# named in INT8_MIXED_FLOAT_NODES, and keeps every other op kind float: the mask's additive
# -1e9, softmax, LayerNorm's mean/variance/rsqrt, GELU, the residual adds, the attention's
# BATCH_MATMULs. Each step of that choice (every op int8; FULLY_CONNECTED and GATHER only;
# the feed-forward outputs float, whose input is GELU's output, whose outliers one int8
# scale cannot hold; the attention outputs float; the fused Q/K/V projections float) was
# measured by `make experiment-full-int8-denylist`: bench/results/full_int8_denylist.json
# holds each variant's agreement with Keras' top label and accuracy on make demo's MR
# validation sentences, and "default" is this setting (the one over the acceptance's 98%).
# What stays int8 is the embeddings, the feed-forward intermediate layers and the head.
INT8_MIXED_QUANTIZED_OPS = ("FULLY_CONNECTED", "GATHER")
# Nodes of those kinds kept float all the same (regular expressions on TFLite tensor names):
# the feed-forward output, the attention output and the fused Q/K/V projection of each block.
INT8_MIXED_FLOAT_NODES = (
    r"feed_forward[^/]*/output[^/]*/",
    r"attention_output[^/]*/",
    r"transformer_layer_\d+[^/]*/MatMul;",
)


# The op set each integer-only precision is converted with: int8 kernels only (8x8), or
# int16 activations with int8 weights (16x8).
INTEGER_ONLY_OPS = {
    "int8_only": tf.lite.OpsSet.TFLITE_BUILTINS_INT8,
    "int16x8_only": tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8,
}


# The int8_only file of a graph whose ranges are fake-quantization ops (quantization-aware
# training): not a choice of users (they ask for int8_only of a QAT model), the converter's mode.
LEARNED_INT8 = "int8_learned"


class ConversionError(ValueError):
    """A model TFLite cannot run with its builtin ops; the message names the op and the layer."""


def explain_converter_error(error):
    """The first op the converter could not lower, and the Keras layer it came from, as a
    one-line message (the converter's own message is pages of MLIR)."""
    text = str(error)
    match = re.search(r'fused\["(\w+):", "([^"@]+)@', text)
    if match is None:
        op = re.search(r"'(tf\.\w+)' op", text)
        what = f"TensorFlow op {op.group(1)}" if op else "an op"
        said = text.strip().splitlines()[0][:300]
        return f"TFLite cannot convert {what} with builtin ops only. Converter said: {said}"
    op, node = match.groups()
    layer = node.rsplit("/", 1)[0] if "/" in node else node
    return (
        f"TFLite has no builtin op for TensorFlow's {op}, used in layer {layer!r} (node {node}). "
        "Rewrite that layer with ops TFLite supports as builtins (see docs/decisions.md: new "
        "axes with ops.expand_dims, GELU as keras.activations.gelu), or export without --formats tflite."
    )


def convert_endpoint(function, input_signature, quantization="float32", *, allow_custom_ops=False, **options):
    """The .tflite bytes of `function` traced on `input_signature`, as the `serving_default`
    signature of an ExportArchive written to a temporary SavedModel (`endpoint_saved_model`).

    Args:
        function: a function of the tensors in `input_signature` (parameters named as the
            inputs: `input_contract.named_endpoint`) returning a dict of tensors.
        input_signature: its tf.TensorSpecs (`input_contract.id_signature` or `text_signature`).
        quantization, allow_custom_ops, options: as for `convert_saved_model`.
    """
    with endpoint_saved_model(function, input_signature) as saved_model:
        return convert_saved_model(saved_model, quantization, allow_custom_ops=allow_custom_ops, **options)


@contextlib.contextmanager
def endpoint_saved_model(function, input_signature):
    """The folder of a temporary SavedModel whose `serving_default` is `function` traced on
    `input_signature` (as for `convert_endpoint`), removed when the block ends: what a caller
    converting one function in several precisions traces and writes once.

    The archive is not given `archive.track(model)`: it already saves every variable the
    endpoint uses, Keras 3.15 saves tracked ones a second time (as the KerasVariable
    wrappers, which doubled a SavedModel on disk), and the .tflite is byte-identical
    without it.
    """
    archive = keras.export.ExportArchive()
    archive.add_endpoint(SERVING_ENDPOINT, function, input_signature=input_signature)
    with tempfile.TemporaryDirectory(prefix="kbert-convert-") as folder:
        saved_model = os.path.join(folder, "saved_model")
        with native_output_held():
            archive.write_out(saved_model, verbose=False)
        yield saved_model


def convert_saved_model(
    saved_model_dir,
    quantization="float32",
    calibration_inputs=None,
    quantized_ops=None,
    float_nodes=None,
    *,
    allow_custom_ops=False,
):
    """The .tflite bytes of the SavedModel's serving signature, builtin ops only.

    Args:
        saved_model_dir: a SavedModel whose `serving_default` takes int32 ids, mask and
            segment_ids (ExportSignatures.export_archive(text=False) writes one).
        quantization: one of QUANTIZATIONS, or of INTEGER_ONLY_QUANTIZATIONS for a graph
            written to quantize whole (conversion/integer_only.py: the Keras graph is not).
        calibration_inputs: for "int8_mixed" and the integer-only precisions, a list of dicts
            {ids, mask, segment_ids} of int32 arrays [1, S]: real examples the activation
            ranges are measured on.
        quantized_ops, float_nodes: for "int8_mixed", the op kinds to quantize and the nodes
            of those kinds to keep float (default INT8_MIXED_QUANTIZED_OPS,
            INT8_MIXED_FLOAT_NODES): what bench/experiments/full_int8_denylist.py varies.
        allow_custom_ops: bool. Lets ops with no builtin through as custom ops: the text-in
            graph's tensorflow-text kernels (its caller then checks that no other is left).
    """
    _check_request(quantization, calibration_inputs)
    convert = saved_model_converter(saved_model_dir, allow_custom_ops=allow_custom_ops)
    return convert(quantization, calibration_inputs, quantized_ops, float_nodes)


def saved_model_converter(saved_model_dir, *, allow_custom_ops=False):
    """`convert(quantization="float32", calibration_inputs=None, quantized_ops=None,
    float_nodes=None)`: the .tflite bytes of the SavedModel in each precision asked for, as
    `convert_saved_model` gives them (its arguments), for a caller writing several precisions
    of one SavedModel: TFLiteConverter.from_saved_model loads the whole SavedModel (its
    functions and variables) to read its signatures, here once for every precision; and
    int8_mixed picks its denylist from the float32 conversion already made, when it was."""
    try:
        with native_output_held():
            loaded = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
    except Exception as error:
        if _is_converter_error(error):
            raise ConversionError(explain_converter_error(error)) from None
        raise
    made = {}  # quantization -> bytes, of the conversions without options that change them

    def convert(quantization="float32", calibration_inputs=None, quantized_ops=None, float_nodes=None):
        _check_request(quantization, calibration_inputs)
        # Each conversion sets its options on a copy: QuantizationDebugger switches its converter
        # to calibration only, which must not reach the next precision's.
        converter = copy.copy(loaded)
        converter.target_spec = copy.copy(loaded.target_spec)
        try:
            # The converter's log lines reach the terminal only with a failure (native_log.py).
            with native_output_held():
                converter.target_spec.supported_ops = [
                    INTEGER_ONLY_OPS.get(quantization, tf.lite.OpsSet.TFLITE_BUILTINS)
                ]
                converter.allow_custom_ops = bool(allow_custom_ops)
                if quantization != "float32":
                    converter.optimizations = [tf.lite.Optimize.DEFAULT]
                if quantization == "float16":
                    converter.target_spec.supported_types = [tf.float16]
                flatbuffer = _convert(
                    converter,
                    quantization,
                    calibration_inputs,
                    quantized_ops,
                    float_nodes,
                    made.get("float32"),
                )
        except Exception as error:
            if _is_converter_error(error):
                raise ConversionError(explain_converter_error(error)) from None
            raise
        if quantization == "float32":
            made[quantization] = flatbuffer
        return flatbuffer

    return convert


def _check_request(quantization, calibration_inputs):
    check_quantization("quantization", quantization, QUANTIZATIONS + STATIC_QUANTIZATIONS + (LEARNED_INT8,))
    if quantization in CALIBRATED_QUANTIZATIONS and not calibration_inputs:
        raise ValueError(
            f"{quantization} needs calibration_inputs: real examples to measure activation ranges on."
        )


def _is_converter_error(error):
    # tensorflow.lite.python.convert_phase.ConverterError: not exported under tf.lite.
    return type(error).__name__ == "ConverterError"


def _convert(converter, quantization, calibration_inputs, quantized_ops, float_nodes, float_model=None):
    """The set-up converter's .tflite bytes in `quantization`; `float_model`: its float32
    conversion, if made already (int8_mixed reads its ops)."""
    if quantization == LEARNED_INT8:
        return _learned_int8(converter)
    if quantization in INTEGER_ONLY_QUANTIZATIONS:
        # Only integer kernels are allowed: an op the quantizer cannot take fails the
        # conversion instead of staying float. The int32 inputs stay int32 and the outputs
        # are dequantized to float32 (the converter's defaults).
        converter.representative_dataset = _representative(calibration_inputs)
        return converter.convert()
    if quantization != "int8_mixed":
        return converter.convert()
    return _int8_mixed(
        converter,
        calibration_inputs,
        INT8_MIXED_QUANTIZED_OPS if quantized_ops is None else tuple(quantized_ops),
        INT8_MIXED_FLOAT_NODES if float_nodes is None else tuple(float_nodes),
        float_model,
    )


def _learned_int8(converter):
    """The integer-only bytes of a graph that carries every range as a fake-quantization op.
    TF 2.20 refuses the int8-only op set without a representative dataset even on this path
    (`_validate_int8_required` runs before it looks at the graph), so the converter gets the
    builtin set, and the file is checked here instead: a point without a range would stay float."""
    from keras_bert_impl.conversion.tflite_targets import TfliteTargets

    flatbuffer = converter.convert()
    targets = TfliteTargets(flatbuffer)
    if not targets.integer_only:
        raise ConversionError(
            f"The quantization-aware graph did not convert integer-only: {targets.why_not()['integer NPU']}"
        )
    return flatbuffer


def _int8_mixed(converter, calibration_inputs, quantized_ops, float_nodes, float_model=None):
    """Calibrated int8 activations and weights for `quantized_ops`, except the nodes matching
    `float_nodes`; every other op kind denylisted, so it stays float (the route of
    tf.lite.experimental.QuantizationDebugger, the converter's public way to a denylist).
    `float_model`: the float32 conversion of the same SavedModel, if made already."""
    representative = _representative(calibration_inputs)
    converter.representative_dataset = representative
    float_ops = _float_ops(converter, float_model)
    denylisted_ops = sorted({op for op, _ in float_ops if op not in quantized_ops})
    denylisted_nodes = sorted(
        name for op, name in float_ops if op in quantized_ops and any(re.search(p, name) for p in float_nodes)
    )
    return _denylisted_quantization(converter, denylisted_ops, denylisted_nodes)


def _denylisted_quantization(converter, denylisted_ops, denylisted_nodes):
    """The bytes `tf.lite.experimental.QuantizationDebugger(converter=converter, debug_options=
    QuantizationDebugOptions(denylisted_ops=..., denylisted_nodes=...)).get_nondebug_quantized_model()`
    returns, by the debugger's own two steps (TF 2.20's debugger.py): the converter's
    calibrated model, then the MLIR quantizer with the denylists. Its constructor first quantizes
    and loads a debug model (NumericVerify ops after every quantized op) that nothing here reads:
    on MiniLM, a third of the file's time. tests/conversion/test_tflite_converter.py checks the
    bytes equal the debugger's."""
    from tensorflow.lite.python.convert import mlir_quantize

    converter.experimental_mlir_quantizer = True
    converter._experimental_calibrate_only = True  # the debugger's own switch (no public one)
    calibrated = converter.convert()
    return mlir_quantize(
        calibrated,
        disable_per_channel=converter._experimental_disable_per_channel,
        fully_quantize=False,
        enable_numeric_verify=False,
        denylisted_ops=denylisted_ops,
        denylisted_nodes=denylisted_nodes,
    )


def _representative(calibration_inputs):
    """The converter's representative dataset: each example's int32 arrays by input name."""

    def representative():
        for example in calibration_inputs:
            yield {name: np.asarray(value, np.int32) for name, value in example.items()}

    return representative


def _float_ops(converter, float_model=None):
    """(op name, output tensor name) of every op of the float conversion (`float_model`, or the
    converter's without optimizations), which the denylist is chosen from."""
    from ai_edge_litert.interpreter import Interpreter

    if float_model is None:
        optimizations, converter.optimizations = converter.optimizations, []
        dataset, converter.representative_dataset = converter.representative_dataset, None
        try:
            float_model = converter.convert()
        finally:
            converter.optimizations, converter.representative_dataset = optimizations, dataset
    interpreter = Interpreter(model_content=float_model)
    names = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
    return [
        (op["op_name"], names[op["outputs"][0]])
        for op in interpreter._get_ops_details()
        if len(op["outputs"])
    ]


def tflite_ops(flatbuffer):
    """The set of op names a .tflite runs ("FULLY_CONNECTED", "CUSTOM", "FlexX"...)."""
    from ai_edge_litert.interpreter import Interpreter

    # _get_ops_details is the interpreter's only listing of its ops (no public twin).
    interpreter = Interpreter(model_content=flatbuffer)
    return {op["op_name"] for op in interpreter._get_ops_details()}


def check_builtins_only(flatbuffer, allowed_custom=()):
    """Raises ConversionError if the .tflite needs Flex ops or custom ops beyond `allowed_custom`."""
    ops = tflite_ops(flatbuffer)
    bad = sorted(op for op in ops if op.startswith("Flex") or (op == "CUSTOM" and not allowed_custom))
    if bad:
        raise ConversionError(f"The .tflite needs ops outside TFLite's builtins: {bad}.")
    return ops
