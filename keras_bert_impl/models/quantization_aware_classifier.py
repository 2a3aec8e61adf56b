"""Quantization-aware training of a classifier for the integer-only TFLite (issue 31)."""

import keras
from keras import ops

from keras_bert_impl.layers.activation_ranges import ActivationRanges
from keras_bert_impl.layers.sublayer_config import deserialize_sublayers
from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.head_compile import HeadCompile
from keras_bert_impl.models.integer_forms import IntegerForms, classifier_forward, quantization_points
from keras_bert_impl.validation import check_probability


def per_channel_fake_quant(kernel):
    """A Dense kernel [in, out] on TFLite's int8 grid: symmetric per output channel, narrow
    range ([-127, 127] times max|column| / 127). Straight-through gradient to the kernel."""
    bound = ops.stop_gradient(ops.maximum(ops.max(ops.abs(kernel), axis=0), 1e-12))  # [out]
    return keras.quantizers.fake_quant_with_min_max_vars(
        kernel, -bound, bound, num_bits=8, narrow_range=True, axis=-1
    )


def symmetric_fake_quant(values, bound=None):
    """`values` on a symmetric per-tensor int8 grid of `bound` (default: max|values|): how
    TFLite stores an embedding table (a GATHER's table takes the scale of the rows it gives)."""
    if bound is None:
        bound = ops.stop_gradient(ops.maximum(ops.max(ops.abs(values)), 1e-12))
    return keras.quantizers.fake_quant_with_min_max_vars(values, -bound, bound, num_bits=8, narrow_range=True)


def constant_fake_quant(values):
    """`values` on the asymmetric per-tensor int8 grid of their own (min, max) (0 always in it):
    how TFLite's converter stores a constant operand of an ADD or MUL (the positions,
    LayerNorm's gamma and beta) whatever grid the values came on, so the forward takes that
    grid (a symmetric one was rounded a second time in the file)."""
    values = ops.convert_to_tensor(values)
    low = ops.stop_gradient(ops.minimum(ops.min(values), 0.0))
    # All zeros (a fresh beta): a range of 0, widened so the grid has a step.
    high = ops.stop_gradient(ops.maximum(ops.maximum(ops.max(values), 0.0), low + 1e-12))
    return keras.quantizers.fake_quant_with_min_max_vars(values, low, high, num_bits=8)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class QuantizationAwareClassifier(HeadCompile, keras.Model):
    """A `BertClassifier` trained for its integer-only TFLite: the forward is the integer file's
    (`models/integer_forms.py`), with int8 fake quantization where that file quantizes: every
    Dense kernel per output channel, the tables per tensor, and every activation the file holds
    in int8 (embeddings, Q/K/V, attention scores, softmax, context, residuals, each step of
    LayerNorm, GELU, pooler, logits) at moving-average ranges (`ActivationRanges`). `fit` trains
    the classifier's own variables through it (straight-through gradients); the ranges follow.

    Wrap a fine-tuned float classifier and fit a little more at a small learning rate: the
    weights learn to live with int8. `conversion.integer_only.convert_integer_only(qat, S)` then
    writes the integer file with the ranges learned (no calibration examples), and
    `qat.classifier` is the float model (its own forward, the Keras layers').

    Args:
        classifier: a `BertClassifier` (not quantized by Keras). Its variables are shared.
        momentum: float in [0, 1). The ranges' moving-average momentum per training batch.

    Example:
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> preprocessor = BertPreprocessor("data/minilm/vocab.txt", sequence_length=16)
    >>> x = preprocessor(["a gripping, funny film", "a dull mess"])
    >>> backbone = kb.BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=32,
    ...                            intermediate_dim=64, max_sequence_length=16)  # small: quick to trace
    >>> classifier = BertClassifier(backbone, num_classes=2)
    >>> qat = QuantizationAwareClassifier(classifier)  # compiled with the classifier's loss and metrics
    >>> history = qat.fit(x, np.array([1, 0]), epochs=1, verbose=0)
    >>> qat.predict(x, verbose=0)["logits"].shape
    (2, 2)
    """

    def __init__(self, classifier, momentum=0.99, **kwargs):
        if not isinstance(classifier, BertClassifier):
            raise ValueError(
                "Quantization-aware training is for a BertClassifier (the integer-only file is built for "
                f"one). Received: classifier={type(classifier).__name__}. Export other heads in float32 or "
                "dynamic_int8."
            )
        if any(getattr(layer, "quantization_mode", None) for layer in classifier._flatten_layers()):
            raise ValueError(
                "classifier holds layers Keras quantized (model.quantize): quantization-aware training "
                "starts from float weights. Wrap the float classifier."
            )
        check_probability("momentum", momentum)
        super().__init__(**kwargs)
        self.classifier = classifier
        self.ranges = ActivationRanges(
            quantization_points(classifier), momentum=momentum, name="activation_ranges"
        )
        self.momentum = float(momentum)
        self.built = True
        self.compile()

    # The classifier's description, read by the tools that take any head (evaluate, predict).
    backbone = property(lambda self: self.classifier.backbone)
    num_classes = property(lambda self: self.classifier.num_classes)
    multi_label = property(lambda self: self.classifier.multi_label)
    activation = property(lambda self: self.classifier.activation)
    pooling = property(lambda self: self.classifier.pooling)
    label_names = property(lambda self: self.classifier.label_names)

    def call(self, inputs, training=False):
        return classifier_forward(self.classifier, inputs, _TrainingForms(self.ranges, bool(training)))

    def default_loss(self):
        return self.classifier.default_loss()

    def default_metrics(self):
        return self.classifier.default_metrics()

    def learned_ranges(self):
        """{point: (min, max)} of every point, for the export; refused before any training step."""
        untrained = self.ranges.untrained()
        if untrained:
            raise ValueError(
                f"{len(untrained)} of {len(self.ranges.points)} activation ranges were never trained (the "
                f"first: {untrained[0]!r}). Fit the QuantizationAwareClassifier (a few hundred steps on the "
                "task's data) before exporting it."
            )
        return {point: self.ranges.range_of(point) for point in self.ranges.points}

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "momentum": self.momentum,
            "classifier": keras.layers.serialize(self.classifier),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**deserialize_sublayers(config, "classifier"))


class _TrainingForms(IntegerForms):
    """The integer forms over the variables, fake-quantized as the integer file quantizes."""

    def __init__(self, ranges, training):
        self.ranges, self.training = ranges, training

    def weight(self, variable):
        # The variable's tensor: slicing a Keras variable itself fails on JAX (issue 30).
        return ops.convert_to_tensor(variable)

    def kernel(self, variable):
        return per_channel_fake_quant(self.weight(variable))

    def table(self, values):
        return constant_fake_quant(self.weight(values))

    def lookup(self, table, indices):
        return ops.take(symmetric_fake_quant(self.weight(table)), indices, axis=0)

    def activation(self, name, x):
        if self.training:
            return self.ranges.fake_quantize(name, x, training=True)
        # The kernels round the exact value half up on the file's grid (tested op by op), which
        # FakeQuantWithMinMaxVars' float32 scale misses by a unit in the last place now and then.
        scale, zero = self._grid(name)
        levels = ops.clip(ops.floor(ops.cast(x, "float32") / scale + 0.5) + zero, -128.0, 127.0)
        quantized = ops.cast((levels - zero) * scale, x.dtype)
        return ops.where(self.ranges._ranges[name][2] > 0, quantized, x)

    def inverse_sqrt(self, name, x):
        # A variance fake-quantized to 0 would give inf: as TFLite's int8 RSQRT ("any value
        # close to 0 represents the max output value"), it takes the top of the range, which
        # the other tokens' values set.
        positive = x > 0
        inverse = ops.rsqrt(ops.maximum(x, 1e-30))
        return self.ranges.fake_quantize(
            name,
            ops.where(positive, inverse, 3.0e38),
            training=self.training,
            observed=ops.where(positive, inverse, 0.0),
        )

    def fixed(self, x, bounds):
        return keras.quantizers.fake_quant_with_min_max_vars(x, bounds[0], bounds[1], num_bits=8)

    # In training the three requantizing ops stay float ops fake-quantized at their output (the
    # gradients go straight through). In inference they compute as LiteRT's default CPU path runs
    # the integer file: the exact integer accumulator, then its kernel's own requantization to the
    # output's grid: XNNPACK's for FULLY_CONNECTED and ADD, TFLite's builtin kernel for
    # BATCH_MATMUL (XNNPACK takes no int8 one). Each rounds a value lying near half a step its own
    # way, one level apart from a float product rounded once (on MiniLM, 0.4% of the attention
    # products), and the network amplifies a level into labels (tested op by op against the file).
    def dense(self, name, layer, x, source):
        def integer():
            kernel = self.weight(layer.kernel)
            kernel_scale = ops.maximum(ops.max(ops.abs(kernel), axis=0), 1e-12) / 127.0  # [out], per channel
            x_scale, _ = self._grid(source)
            out_scale, out_zero = self._grid(name)
            levels = ops.round(
                self.kernel(layer.kernel) / kernel_scale
            )  # [in, out] in [-127, 127], as the file's
            accumulator = _exact_matmul(ops.round(x / x_scale), levels, 255 * 127)
            accumulator = accumulator + ops.cast(
                ops.round(self.weight(layer.bias) / (x_scale * kernel_scale)), "int32"
            )
            # XNNPACK's on x86: the accumulator as float32 times the float32 rescale, rounded half to even.
            levels = ops.round(ops.cast(accumulator, "float32") * (x_scale * kernel_scale / out_scale))
            return _on_grid(levels, out_scale, out_zero)

        return self._if_trained(
            (source, name), integer, lambda: super(_TrainingForms, self).dense(name, layer, x, source)
        )

    def matmul(self, name, a, a_source, b, b_source):
        def integer():
            (a_scale, _), (b_scale, b_zero), (out_scale, out_zero) = (
                self._grid(s) for s in (a_source, b_source, name)
            )
            accumulator = _exact_matmul(ops.round(a / a_scale), ops.round(b / b_scale), 255 * 255)
            multiplier = a_scale * b_scale / out_scale
            # XNNPACK takes a BATCH_MATMUL whose right operand's zero point is 0 (its kernels
            # want one for a weight), and rescales as for FULLY_CONNECTED; TFLite's kernel the others.
            xnnpack = ops.round(ops.cast(accumulator, "float32") * multiplier)
            return _on_grid(
                ops.where(b_zero == 0.0, xnnpack, ops.cast(_requantize(accumulator, multiplier), "float32")),
                out_scale,
                out_zero,
            )

        return self._if_trained(
            (a_source, b_source, name),
            integer,
            lambda: super(_TrainingForms, self).matmul(name, a, a_source, b, b_source),
        )

    def add(self, name, a, a_source, b, b_source):
        def integer():
            # XNNPACK's int8 ADD: each input's rescale to the output as an integer multiplier of
            # 21 bits for the larger one, the products summed and shifted right rounding half up.
            (a_scale, _), (b_scale, _), (out_scale, out_zero) = (
                self._grid(s) for s in (a_source, b_source, name)
            )
            a_rescale, b_rescale = a_scale / out_scale, b_scale / out_scale
            exponent = _exponent(ops.maximum(a_rescale, b_rescale))
            power = ops.power(2.0, ops.minimum(20.0 - exponent, 30.0))  # an int32 shift of at most 30
            total = sum(
                ops.cast(ops.round(v / scale), "int32") * ops.cast(ops.round(rescale * power), "int32")
                for v, scale, rescale in ((a, a_scale, a_rescale), (b, b_scale, b_rescale))
            )
            power = ops.cast(power, "int32")
            return _on_grid(ops.floor_divide(total + ops.floor_divide(power, 2), power), out_scale, out_zero)

        return self._if_trained(
            (a_source, b_source, name),
            integer,
            lambda: super(_TrainingForms, self).add(name, a, a_source, b, b_source),
        )

    def mean(self, name, x, source):
        def integer():
            # The sum of the levels, exact in float32 below 2^24 / 255 terms, rescaled as XNNPACK
            # does: a mean of float values loses the low bits of a sum that cancels nearly to 0,
            # on a grid finer than its terms'.
            (x_scale, _), (out_scale, out_zero) = self._grid(source), self._grid(name)
            total = ops.sum(ops.round(x / x_scale), axis=-1, keepdims=True)
            return _on_grid(
                ops.round(total * (x_scale / (out_scale * float(x.shape[-1])))), out_scale, out_zero
            )

        return self._if_trained(
            (source, name), integer, lambda: super(_TrainingForms, self).mean(name, x, source)
        )

    def _grid(self, source):
        """(scale, zero point as an int8 level) of a point or of fixed bounds, as TFLite stores
        them: fake_quant_with_min_max_vars' nudged grid."""
        if isinstance(source, str):
            variable = self.ranges._ranges[source]
            low, high = variable[0], variable[1]
        elif source[0] == "rows":  # symmetric_fake_quant's grid of the table, whose scale a GATHER keeps
            bound = ops.maximum(ops.max(ops.abs(self.weight(source[1]))), 1e-12)
            return _scale(bound, -bound, 254.0), ops.zeros((), "float32")
        elif source[0] == "table":  # constant_fake_quant's grid
            values = self.weight(source[1])
            low = ops.minimum(ops.min(values), 0.0)
            high = ops.maximum(ops.maximum(ops.max(values), 0.0), low + 1e-12)
        else:
            low, high = (ops.convert_to_tensor(float(v), "float32") for v in source)
        return _scale(high, low), ops.round(ops.clip(-low / ((high - low) / 255.0), 0.0, 255.0)) - 128.0

    def _if_trained(self, sources, integer, fallback):
        """In training `fallback()`, the float op; in inference `integer()` where every point of
        `sources` has its range, else `fallback()` (a point never trained stays float, as in
        `ActivationRanges.fake_quantize`)."""
        if self.training:
            return fallback()
        seen = [
            self.ranges._ranges[s][2] > 0 for s in sources if isinstance(s, str)
        ]  # one at least: the output
        return ops.cond(ops.all(ops.stack(seen)), integer, fallback)


def _scale(high, low, levels=255.0):
    """(high - low) / levels (255; 254 for a symmetric narrow grid) as the converter stores a scale:
    the quotient in double rounded to float32, which float32 arithmetic misses by one unit in the
    last place now and then (the kernels' rescaling then moves values at a near-tie). In float32
    ops: the subtraction's error (Knuth's two-sum) and the division's remainder correct the float32
    quotient."""
    difference = high - low
    virtual = difference - high
    error = (high - (difference - virtual)) + (-low - virtual)  # high - low = difference + error, exactly
    quotient = difference / levels
    remainder = (difference - quotient * (levels + 1.0)) + quotient  # difference - levels quotient
    return quotient + (remainder + error) / levels


_TRACED_LENGTH_BOUND = 4096


def _exact_matmul(a, b, bound):
    """a [..., M, K] @ b [..., K, N] of integer-valued float32 tensors whose products are at most
    `bound` in magnitude, as exact int32: float32 holds every integer below 2^24, so a product
    summed over at most 2^24 / bound terms is exact in any order; longer sums are cut into such
    chunks and the chunks added in int32."""
    chunk = (1 << 24) // bound
    # A length unknown while tracing (the sequence, for attention's context) is at most a
    # backbone's positions; chunks past the real length slice to nothing and add zeros.
    length = a.shape[-1] if a.shape[-1] is not None else _TRACED_LENGTH_BOUND
    total = None
    for start in range(0, length, chunk):
        part = ops.cast(ops.matmul(a[..., start : start + chunk], b[..., start : start + chunk, :]), "int32")
        total = part if total is None else total + part
    return total


def _exponent(value):
    """floor(log2(value)) of positive float32 values, exactly (float32's log2 may miss by one
    next to a power of two)."""
    exponent = ops.floor(ops.log2(value))
    return (
        exponent
        + ops.cast(value >= ops.power(2.0, exponent + 1.0), "float32")
        - ops.cast(value < ops.power(2.0, exponent), "float32")
    )


def _requantize(accumulator, multiplier):
    """TFLite's MultiplyByQuantizedMultiplier of the int32 `accumulator` by the positive real
    `multiplier` (float32, broadcast): the multiplier as a Q31 significand and a power of two
    (QuantizeMultiplier), the product's high 32 bits rounded half up (gemmlowp's
    SaturatingRoundingDoublingHighMul), then divided by the power of two rounding half away
    from zero (RoundingDivideByPOT). In int32 only, every backend alike: the 62-bit product is
    taken in 15-bit limbs. |accumulator| < 2^30 (every accumulator here)."""
    exponent = _exponent(multiplier) + 1.0
    significand = multiplier * ops.power(2.0, -exponent)  # in [0.5, 1)
    q31 = ops.cast(
        ops.round(significand * 2.0**31), "int32"
    )  # < 2^31: a float32 significand is below 1 - 2^-24
    left = ops.cast(ops.maximum(exponent, 0.0), "int32")
    right = ops.minimum(
        ops.maximum(-exponent, 0.0), 30.0
    )  # 2^31 is past int32; a smaller multiplier gives 0 anyway
    x = accumulator * ops.cast(ops.power(2.0, ops.cast(left, "float32")), "int32")
    limb = 1 << 15
    a0, a1 = ops.mod(x, limb), ops.floor_divide(x, limb)
    m0, m1, m2 = (
        ops.mod(q31, limb),
        ops.mod(ops.floor_divide(q31, limb), limb),
        ops.floor_divide(q31, 1 << 30),
    )
    # x * q31 = c3 2^45 + c2 2^30 + c1 2^15 + c0, carried into 15-bit digits d0, d1, d2.
    c1 = a1 * m0 + a0 * m1 + ops.floor_divide(a0 * m0, limb)
    c2 = a1 * m1 + a0 * m2 + ops.floor_divide(c1, limb)
    c3 = a1 * m2 + ops.floor_divide(c2, limb)
    d2 = ops.mod(c2, limb)
    high = c3 * (1 << 14) + ops.floor_divide(d2 + 1, 2)  # floor((x q31 + 2^30) / 2^31)
    power = ops.cast(ops.power(2.0, right), "int32")
    quotient = ops.floor_divide(high, power)
    remainder = high - quotient * power
    threshold = ops.floor_divide(power - 1, 2) + ops.cast(high < 0, "int32")
    return quotient + ops.cast(remainder > threshold, "int32")


def _on_grid(levels, scale, zero):
    """The int32 `levels` of a requantized output plus its zero point, clamped to int8, as floats."""
    quantized = ops.clip(ops.cast(levels, "float32") + zero, -128.0, 127.0)
    return (quantized - zero) * scale
