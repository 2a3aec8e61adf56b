"""Quantization-aware training of a classifier for the integer-only TFLite (issue 31)."""

import keras
from keras import ops

from keras_bert_impl.layers.activation_ranges import ActivationRanges
from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.head_compile import HeadCompile
from keras_bert_impl.models.integer_forms import IntegerForms, classifier_forward, quantization_points
from keras_bert_impl.validation import check_probability


def per_channel_fake_quant(kernel):
    """A Dense kernel [in, out] on TFLite's int8 grid: symmetric per output channel, narrow
    range ([-127, 127] times max|column| / 127). Straight-through gradient to the kernel."""
    bound = ops.stop_gradient(ops.maximum(ops.max(ops.abs(kernel), axis=0), 1e-12))  # [out]
    return keras.quantizers.fake_quant_with_min_max_vars(kernel, -bound, bound, num_bits=8, narrow_range=True, axis=-1)


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
    >>> x = BertPreprocessor("data/minilm/vocab.txt", sequence_length=16)(["a gripping, funny film", "a dull mess"])
    >>> classifier = BertClassifier(kb.BertBackbone.from_preset("bert_tiny"), num_classes=2)
    >>> qat = QuantizationAwareClassifier(classifier)  # compiled with the classifier's loss and metrics
    >>> history = qat.fit(x, np.array([1, 0]), epochs=1, verbose=0)
    >>> qat.predict(x, verbose=0)["logits"].shape
    (2, 2)
    """

    def __init__(self, classifier, momentum=0.99, **kwargs):
        if not isinstance(classifier, BertClassifier):
            raise ValueError(
                "Quantization-aware training is for a BertClassifier (the integer-only file is built for one). "
                f"Received: classifier={type(classifier).__name__}. Export other heads in float32 or dynamic_int8."
            )
        if any(getattr(layer, "quantization_mode", None) for layer in classifier._flatten_layers()):
            raise ValueError("classifier holds layers Keras quantized (model.quantize): quantization-aware training "
                             "starts from float weights. Wrap the float classifier.")
        check_probability("momentum", momentum)
        super().__init__(**kwargs)
        self.classifier = classifier
        self.ranges = ActivationRanges(quantization_points(classifier), momentum=momentum, name="activation_ranges")
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
                f"{len(untrained)} of {len(self.ranges.points)} activation ranges were never trained (the first: "
                f"{untrained[0]!r}). Fit the QuantizationAwareClassifier (a few hundred steps on the task's data) "
                "before exporting it."
            )
        return {point: self.ranges.range_of(point) for point in self.ranges.points}

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "momentum": self.momentum,
                "classifier": keras.layers.serialize(self.classifier)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["classifier"] = keras.layers.deserialize(config["classifier"])
        return cls(**config)


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
        return self.ranges.fake_quantize(name, x, training=self.training)

    def inverse_sqrt(self, name, x):
        # A variance fake-quantized to 0 would give inf: as TFLite's int8 RSQRT ("any value
        # close to 0 represents the max output value"), it takes the top of the range, which
        # the other tokens' values set.
        positive = x > 0
        inverse = ops.rsqrt(ops.maximum(x, 1e-30))
        return self.ranges.fake_quantize(name, ops.where(positive, inverse, 3.0e38), training=self.training,
                                         observed=ops.where(positive, inverse, 0.0))

    def fixed(self, x, bounds):
        return keras.quantizers.fake_quant_with_min_max_vars(x, bounds[0], bounds[1], num_bits=8)
