"""Position-wise feed-forward network: Dense(I) -> activation -> Dense(H).

Shape legend: B batch, T sequence length, H hidden size, I intermediate size.
"""

import keras
from keras import ops

from keras_bert_impl.layers.activations import ACTIVATIONS, get_activation
from keras_bert_impl.validation import check_bool, check_choice, check_positive_int


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class FeedForward(keras.layers.Layer):
    """BERT's position-wise feed-forward block, applied to every token alike.

    Args:
        intermediate_dim: int. Inner width I (4 * H in BERT).
        activation: str. `"gelu"` (exact erf form, BERT paper and Hugging Face),
            `"gelu_approximate"` (tanh form of Google's modeling.py), `"relu"`, ...
        initializer_range: float.
        fused_kernels: bool. On the JAX backend on a GPU, the intermediate layer's bias add and
            exact GELU run as one Pallas kernel (`keras_bert_impl.kernels.bias_gelu`), forward
            and backward; elsewhere, by default, and for other activations, the Dense layer's own.

    Example:
    >>> FeedForward(intermediate_dim=32)(keras.ops.ones((2, 4, 8))).shape
    TensorShape([2, 4, 8])
    """

    def __init__(
        self, intermediate_dim, activation="gelu", initializer_range=0.02, fused_kernels=False, **kwargs
    ):
        super().__init__(**kwargs)
        check_positive_int("intermediate_dim", intermediate_dim)
        check_choice("activation", activation, ACTIVATIONS)
        check_bool("fused_kernels", fused_kernels)
        self.fused_kernels = fused_kernels
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.initializer_range = initializer_range
        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.intermediate_dense = keras.layers.Dense(
            intermediate_dim,
            activation=get_activation(activation),
            kernel_initializer=initializer,
            name="intermediate",
            dtype=self.dtype_policy,
        )
        self._kernel_initializer = initializer

    def build(self, input_shape):
        self.intermediate_dense.build(input_shape)
        self.output_dense = keras.layers.Dense(
            input_shape[-1],
            kernel_initializer=self._kernel_initializer,
            name="output",
            dtype=self.dtype_policy,
        )
        self.output_dense.build(tuple(input_shape[:-1]) + (self.intermediate_dim,))
        self.built = True

    def call(self, x):
        if self._fused_gelu(x):
            from keras_bert_impl.kernels.bias_gelu import bias_gelu
            from keras_bert_impl.kernels.fused_choice import interpret_mode

            dense = self.intermediate_dense
            intermediate = bias_gelu(
                ops.matmul(x, ops.cast(dense.kernel, x.dtype)),
                ops.cast(dense.bias, x.dtype),
                interpret_mode(),
            )  # [B, T, I]
            return self.output_dense(intermediate)
        return self.output_dense(self.intermediate_dense(x))  # [B, T, I] -> [B, T, H]

    def _fused_gelu(self, x):
        """The Pallas bias + GELU applies: asked for, exact GELU, a plain float Dense (Keras'
        quantized or LoRA layers apply their kernels in their own call), and the kernels run here."""
        dense = self.intermediate_dense
        if not (
            self.fused_kernels
            and self.activation == "gelu"
            and dense.quantization_mode is None
            and not dense.lora_enabled
        ):
            return False
        from keras_bert_impl.kernels.fused_choice import fused_kernels_run

        return fused_kernels_run(x)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "initializer_range": self.initializer_range,
                "fused_kernels": self.fused_kernels,
            }
        )
        return config
