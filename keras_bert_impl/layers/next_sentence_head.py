"""Next-sentence-prediction head: two logits (IsNext, NotNext) from the pooled output."""

import keras


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class NextSentenceHead(keras.layers.Layer):
    """Dense(2) on the pooler output; index 0 = IsNext, 1 = NotNext (Google's order).

    Args:
        initializer_range: float.

    Example:
    >>> NextSentenceHead()(keras.ops.ones((4, 8))).shape
    TensorShape([4, 2])
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            2,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            name="dense",
            dtype=self.dtype_policy,
        )

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.built = True

    def call(self, pooled_output):
        return self.dense(pooled_output)  # [B, H] -> [B, 2]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (2,)

    def get_config(self):
        config = super().get_config()
        config.update({"initializer_range": self.initializer_range})
        return config
