"""The activation ranges quantization-aware training learns, one (min, max) per named point."""

import keras
from keras import ops

from keras_bert_impl.validation import check_probability


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ActivationRanges(keras.layers.Layer):
    """Moving-average (min, max) ranges of activations, and int8 fake quantization at them.

    Each point holds a non-trainable float32 [3] variable: min, max and whether the point has
    seen a training batch. In training, `fake_quantize(name, x)` moves the range toward the batch's
    (min, max) (the first batch sets it; ranges always hold 0, as TFLite's do) and fake-quantizes
    `x` at the new range; in inference it fake-quantizes at the stored range, and leaves a point
    never trained in float. What tfmot's MovingAverageQuantizer does, built on
    `keras.quantizers.fake_quant_with_min_max_vars`, so it runs on every backend and lowers to
    TensorFlow's FakeQuantWithMinMaxVars, which the TFLite converter reads ranges from.

    Under tf.distribute the batch's (min, max) are the whole global batch's (gathered from the
    replicas, as synchronized batch normalization does), so every replica moves the range
    alike and a mirrored fit equals a one-device one; the variables average over replicas
    (aggregation "mean") of equal values.

    Args:
        points: list of str. The point names (`integer_forms.quantization_points`).
        momentum: float in [0, 1). Weight of the old range at each training batch.

    Example:
    >>> ranges = ActivationRanges(["scores"])
    >>> x = ops.convert_to_tensor([[-1.0, 0.5, 2.0]])
    >>> y = ranges.fake_quantize("scores", x, training=True)
    >>> [round(float(v), 3) for v in ranges.range_of("scores")]
    [-1.0, 2.0]
    """

    def __init__(self, points, momentum=0.99, **kwargs):
        super().__init__(**kwargs)
        points = list(points)
        if not points or len(set(points)) != len(points) or not all(isinstance(p, str) and p for p in points):
            raise ValueError(f"points must be distinct non-empty names. Received: points={points!r}")
        check_probability("momentum", momentum)  # [0, 1): 1 would never move a range
        self.points = points
        self.momentum = float(momentum)
        self._ranges = {
            point: self.add_weight(
                shape=(3,),
                initializer="zeros",
                trainable=False,
                autocast=False,
                dtype="float32",
                aggregation="mean",
                name=point.replace("/", "."),
            )
            for point in points
        }
        self.built = True

    def fake_quantize(self, name, x, training=False, observed=None):
        """`x` fake-quantized to int8 at the range of point `name` (updated first in training,
        from the values of `observed` if given, else of `x`)."""
        variable = self._ranges[name]
        values = ops.cast(x, "float32")
        if training:
            seen = variable[2]
            observed = values if observed is None else ops.cast(observed, "float32")
            low, high = _over_replicas(
                ops.stop_gradient(ops.min(observed)), ops.stop_gradient(ops.max(observed))
            )
            low, high = ops.minimum(low, 0.0), ops.maximum(high, 0.0)
            m = self.momentum
            low = ops.where(seen > 0, m * variable[0] + (1.0 - m) * low, low)
            high = ops.where(seen > 0, m * variable[1] + (1.0 - m) * high, high)
            variable.assign(ops.stack([low, high, ops.ones((), "float32")]))
            return ops.cast(
                keras.quantizers.fake_quant_with_min_max_vars(values, low, high, num_bits=8), x.dtype
            )
        quantized = keras.quantizers.fake_quant_with_min_max_vars(
            values, variable[0], variable[1], num_bits=8
        )
        return ops.cast(ops.where(variable[2] > 0, quantized, values), x.dtype)

    def load_own_variables(self, store):
        # A file saved by a version that quantized other points (its LayerNorm peak had a range
        # of its own) would otherwise fail as Keras' variable count, with no word of the fix.
        if len(store.keys()) != len(self.points):
            raise ValueError(
                f"its activation ranges do not fit the {len(self.points)} points this version of "
                "keras_bert_impl quantizes: it was saved by another version, whose ranges miss what its "
                "integer file computes now. Fine-tune it again with `kbert finetune --qat` (or "
                "QuantizationAwareClassifier.fit)"
            )
        super().load_own_variables(store)

    def range_of(self, name):
        """(min, max) of point `name` as floats."""
        values = self._ranges[name].numpy()
        return float(values[0]), float(values[1])

    def untrained(self):
        """The points no training batch has reached."""
        return [p for p in self.points if float(self._ranges[p].numpy()[2]) == 0]

    def get_config(self):
        return {**super().get_config(), "points": self.points, "momentum": self.momentum}


def _over_replicas(low, high):
    """(min, max) over every replica's share of the batch under a tf.distribute strategy
    (themselves outside one, or on another backend)."""
    if keras.backend.backend() != "tensorflow":
        return low, high
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return low, high
    # No MIN/MAX all-reduce in tf.distribute: gather each replica's pair, then reduce.
    extremes = tf.reduce_max(context.all_gather(tf.stack([-low, high])[None], axis=0), axis=0)  # [2]
    return -extremes[0], extremes[1]
