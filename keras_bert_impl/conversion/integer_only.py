"""An integer-only .tflite of a classifier: every op between the int32 id inputs and the last
DEQUANTIZE works on int8 (or int16) tensors, what phone NPUs and the Edge TPU take; and from
the same static forward, the GPU delegate's float16 file (`convert_static`, "float16_gpu").

Why a forward of its own, and not the Keras model traced (as `convert_endpoint` does for every
other file, and `LiteRtForward` for `--precision int8`): the full-integer quantizer leaves parts of
the Keras graph float or refuses them; `models/integer_forms.py` says which and computes the
same function in forms it takes whole. `integer_forward` traces those forms at a static [1, S]
over the weights as constants.

Two ways to the activation ranges: post-training, the converter measures them on calibration
examples; from a `QuantizationAwareClassifier`, the forward carries the ranges the model learned
as fake-quantization ops and the converter takes them (its quantization-aware path): no
calibration file, and the file computes what the model computed in training.
"""

import keras
import numpy as np

from keras_bert_impl.backend_support import require_tensorflow

tf = require_tensorflow(
    "keras_bert_impl.conversion.integer_only (integer-only TFLite)",
    "Convert in a TensorFlow process; the .tflite runs anywhere LiteRT does.",
)

from keras_bert_impl.conversion.input_contract import (  # noqa: E402
    INTEGER_ONLY_QUANTIZATIONS,
    STATIC_QUANTIZATIONS,
    id_signature,
    named_endpoint,
)
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS  # noqa: E402
from keras_bert_impl.models.integer_forms import IntegerForms, classifier_forward  # noqa: E402
from keras_bert_impl.models.quantization_aware_classifier import (  # noqa: E402
    QuantizationAwareClassifier,
    constant_fake_quant,
    per_channel_fake_quant,
    symmetric_fake_quant,
)
from keras_bert_impl.validation import check_choice, check_sequence_length  # noqa: E402


def integer_forward(model, sequence_length, probabilities=False):
    """`(ids, mask, segment_ids) -> {logits or probabilities: float32 [1, C]}`: the classifier
    `model`'s inference pass in integer forms (`models/integer_forms.py`), as a `tf.function`
    of int32 [1, sequence_length] tensors named as every export's inputs (`EXPORT_ID_INPUTS`).

    The weights are the model's as they are now, held as constants. For a
    `QuantizationAwareClassifier`, every point it quantizes is a fake quantization at the range
    it learned (per output channel for the kernels), which the converter turns into int8.

    Args:
        model: a built `BertClassifier` of this library, not quantized by Keras, or a trained
            `QuantizationAwareClassifier`.
        sequence_length: int. The static length S of the inputs.
        probabilities: bool. Give `probabilities`, a softmax of the logits (a sigmoid for a
            multi-label head; what MediaPipe's TextClassifier reads), for a head without an
            activation of its own.
    """
    from keras_bert_impl.models.bert_classifier import BertClassifier

    ranges = None
    if isinstance(model, QuantizationAwareClassifier):
        model, ranges = model.classifier, model.learned_ranges()
    if not isinstance(model, BertClassifier):
        raise ValueError(
            "The integer-only file is built for a BertClassifier. "
            f"Received: model={type(model).__name__}. Export other heads in float32 or dynamic_int8."
        )
    if any(getattr(layer, "quantization_mode", None) for layer in model._flatten_layers()):
        raise ValueError(
            "model holds layers Keras quantized (model.quantize): the integer-only file quantizes "
            "from float weights. Convert the float model."
        )
    check_sequence_length("sequence_length", sequence_length, model.backbone.max_sequence_length)
    forms = _ExportForms(ranges)

    def forward(ids, mask, segment_ids):  # int32 [1, S] each
        return classifier_forward(
            model,
            {"token_ids": ids, "padding_mask": mask, "segment_ids": segment_ids},
            forms,
            probabilities=probabilities,
        )

    return tf.function(
        named_endpoint(forward, EXPORT_ID_INPUTS),
        input_signature=id_signature(EXPORT_ID_INPUTS, batch=1, length=sequence_length),
        autograph=False,
    )


class _ExportForms(IntegerForms):
    """The forms over the weights as float32 constants, the lookups as plain GATHERs (no index
    check); with `ranges` ({point: (min, max)}, a trained QuantizationAwareClassifier's), fake
    quantization where the model's training applied it, at the ranges it learned."""

    def __init__(self, ranges=None):
        self.ranges = ranges

    def weight(self, variable):
        if _computed(variable):
            return variable
        return tf.constant(_array(variable))

    # The weights are fake-quantized here, eagerly, into constants already on the int8 grid:
    # the converter then quantizes those constants (per output channel for the kernels)
    # without loss. A FakeQuantWithMinMaxVarsPerChannel op left in the graph on a kernel is
    # refused ("'tfl.transpose' op has mismatched quantized axes"): MatMul's kernel [in, out]
    # is transposed to FULLY_CONNECTED's [out, in] after the axis is fixed.
    def kernel(self, variable):
        if self.ranges is None:
            return self.weight(variable)
        with tf.init_scope():
            return tf.constant(per_channel_fake_quant(tf.constant(_array(variable))))

    def table(self, values):
        if self.ranges is None:
            return self.weight(values)
        if _computed(values):  # the sinusoidal positions: a graph of constants, folded by the converter
            return constant_fake_quant(values)
        with tf.init_scope():
            return tf.constant(constant_fake_quant(_array(values)))

    def lookup(self, table, indices):
        if self.ranges is None:
            return tf.gather(self.weight(table), indices)
        with tf.init_scope():
            table_on_grid = tf.constant(symmetric_fake_quant(_array(table)))
        rows = tf.gather(table_on_grid, indices)
        # The same rows; the fake quantization tells the converter the GATHER's range (the
        # table's), so it needs no calibration for it.
        return symmetric_fake_quant(rows, bound=float(np.abs(_array(table)).max()))

    def activation(self, name, x):
        if self.ranges is None:
            return x
        low, high = self.ranges[name]
        return tf.quantization.fake_quant_with_min_max_vars(x, low, high, num_bits=8)

    def fixed(self, x, bounds):
        if self.ranges is None:
            return x
        return tf.quantization.fake_quant_with_min_max_vars(x, bounds[0], bounds[1], num_bits=8)

    # The [CLS] row as a product with a one-hot row, not a STRIDED_SLICE: the converter requires
    # a slice's input and output scales to be equal and derives them from the learned range by
    # two roundings that can differ in the last float32 place ("'tfl.strided_slice' op
    # quantization parameters violate the same scale constraint": a one-layer QAT classifier of
    # hidden size 16 failed). The one (1.0 on the [0, 1] grid) times each value on the source's
    # grid, requantized to that grid, is the value itself: the file computes what the slice does.
    def first_token(self, x, source):  # x [B, S, H] -> [B, H]
        if self.ranges is None:
            return x[:, 0]
        one_hot = self.fixed(tf.one_hot([[0]], x.shape[1], dtype=x.dtype), (0.0, 1.0))  # [1, 1, S]
        return tf.reshape(
            self.activation(source, tf.matmul(one_hot, x)), [-1, x.shape[2]]
        )  # [B, 1, H] -> [B, H]


def _computed(weight):
    """Whether `weight` is a tensor the forward computes (the sinusoidal positions), not a
    variable or an array."""
    return tf.is_tensor(weight) and not isinstance(weight, (keras.Variable, tf.Variable, np.ndarray))


def _array(weight):
    """A variable's (or an array's) values as float32 numpy, read eagerly even while the
    forward is traced, so the forward holds them as constants."""
    if isinstance(weight, np.ndarray):
        return weight.astype(np.float32)
    with tf.init_scope():
        return np.asarray(weight.numpy(), np.float32)


def _check_calibration(examples, sequence_length, backbone):
    """Each calibration example as the static file takes it, checked before the converter
    runs them: it said "KeyError: 'ids'" or "Given shapes, [1,32,16] and [1,16,16], are not
    broadcastable", naming no example."""
    limits = {"ids": backbone.vocabulary_size, "mask": 2, "segment_ids": backbone.num_segments}
    for number, example in enumerate(examples or []):
        keys = sorted(example) if isinstance(example, dict) else None
        if keys != sorted(limits):
            raise ValueError(
                f"calibration_inputs[{number}] must be a dict of {sorted(limits)} (the static file's "
                f"inputs). Received: {keys if keys is not None else type(example).__name__}"
            )
        for name, limit in limits.items():
            value = np.asarray(example[name])
            if value.shape != (1, sequence_length):
                raise ValueError(
                    f"calibration_inputs[{number}][{name!r}] must have the shape [1, {sequence_length}] "
                    f"of the file (pad or cut the example to {sequence_length}). Received: "
                    f"{list(value.shape)}"
                )
            if not np.issubdtype(value.dtype, np.integer) or value.min() < 0 or value.max() >= limit:
                raise ValueError(
                    f"calibration_inputs[{number}][{name!r}] must hold integers in [0, {limit}). "
                    f"Received: {value.dtype} values from {value.min()} to {value.max()}"
                )


def convert_integer_only(model, sequence_length, calibration_inputs=None, quantization="int8_only"):
    """The integer-only .tflite bytes of the classifier `model` at the static shape
    [1, sequence_length]: `integer_forward` converted through the one conversion home with
    integer kernels only; int32 `ids`, `mask`, `segment_ids` in, float32 logits (or
    probabilities) out of the one DEQUANTIZE at the end.

    Args:
        model: a built `BertClassifier`, or a trained `QuantizationAwareClassifier` (see
            `integer_forward`): its file takes the ranges it learned, int8_only only.
        sequence_length: int. The static length S.
        calibration_inputs: for a `BertClassifier`, a list of dicts {ids, mask, segment_ids}
            of int32 arrays [1, S]: real examples of the task, on which the activation
            ranges are measured (a few hundred sentences). None for a
            `QuantizationAwareClassifier`.
        quantization: "int8_only" (TFLite's 8x8: int8 activations and weights) or
            "int16x8_only" (16x8: int16 activations, int8 weights).

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100)
    >>> model = kb.BertClassifier(backbone, num_classes=2)
    >>> ids = np.array([[2, 7, 3, 0]], "int32")
    >>> example = {"ids": ids, "mask": (ids > 0).astype("int32"), "segment_ids": np.zeros_like(ids)}
    >>> flatbuffer = convert_integer_only(model, 4, [example])
    >>> len(flatbuffer) < 0.3 * sum(w.size * 4 for w in model.get_weights())
    True
    """
    check_choice("quantization", quantization, INTEGER_ONLY_QUANTIZATIONS)
    return convert_static(model, sequence_length, quantization, calibration_inputs)


def convert_static(model, sequence_length, quantization, calibration_inputs=None, probabilities=False):
    """The .tflite bytes of `integer_forward` at [1, sequence_length] in one of
    STATIC_QUANTIZATIONS: the integer-only ones (see `convert_integer_only`) or "float16_gpu",
    float16 weights and float activations for the GPU delegate. The GPU delegate plans its
    kernels when it is built, so it wants a static `shape_signature` and no SHAPE or PACK op:
    this forward has neither, where the Keras graph traced at a free [B, T] has both.

    Args:
        model: a built `BertClassifier` (see `integer_forward`).
        sequence_length: int. The static length S.
        quantization: one of STATIC_QUANTIZATIONS.
        calibration_inputs: for the integer-only ones, as for `convert_integer_only`; unused
            by "float16_gpu".
        probabilities: bool. As for `integer_forward` (the MediaPipe file).

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100)
    >>> model = kb.BertClassifier(backbone, num_classes=2)
    >>> flatbuffer = convert_static(model, 4, "float16_gpu")
    >>> from keras_bert_impl.conversion.tflite_targets import TfliteTargets
    >>> TfliteTargets(flatbuffer).runs_on()
    ['CPU', 'GPU (shapes)']
    """
    from keras_bert_impl.conversion.tflite_converter import convert_endpoint

    check_choice("quantization", quantization, STATIC_QUANTIZATIONS)
    if isinstance(model, QuantizationAwareClassifier):
        if quantization == "float16_gpu":  # the float file of the float model it trained
            model = model.classifier
        elif quantization != "int8_only":
            raise ValueError(
                f"A QuantizationAwareClassifier learned int8 ranges: it converts to int8_only (or the float "
                f"files of its .classifier). Received: quantization={quantization!r}"
            )
        elif calibration_inputs:
            raise ValueError(
                "A QuantizationAwareClassifier converts with the ranges it learned: give no "
                "calibration_inputs (they would not be used)."
            )
        else:
            function = integer_forward(model, sequence_length, probabilities=probabilities)
            return convert_endpoint(function.python_function, function.input_signature, "int8_learned")
    function = integer_forward(model, sequence_length, probabilities=probabilities)
    if quantization == "float16_gpu":
        return convert_endpoint(function.python_function, function.input_signature, "float16")
    _check_calibration(calibration_inputs, sequence_length, model.backbone)
    return convert_endpoint(
        function.python_function,
        function.input_signature,
        quantization,
        calibration_inputs=calibration_inputs,
    )
