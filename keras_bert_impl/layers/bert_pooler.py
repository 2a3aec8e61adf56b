"""BERT's pooler: a tanh dense layer on the first ([CLS]) token."""

import keras


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertPooler(keras.layers.Layer):
    """tanh(W h_[CLS] + b), the sentence vector the NSP and classifier heads read.

    Args:
        initializer_range: float. Stddev of the truncated-normal initializer.

    Example:
    >>> BertPooler()(keras.ops.ones((2, 5, 8))).shape
    TensorShape([2, 8])
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self._initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)

    def build(self, input_shape):
        self.dense = keras.layers.Dense(
            input_shape[-1],
            activation="tanh",
            kernel_initializer=self._initializer,
            name="dense",
            dtype=self.dtype_policy,
        )
        self.dense.build((input_shape[0], input_shape[-1]))
        self.built = True

    def call(self, sequence_output):
        return self.dense(sequence_output[:, 0, :])  # [B, T, H] -> [B, H]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update({"initializer_range": self.initializer_range})
        return config
