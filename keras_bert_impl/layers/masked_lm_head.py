"""Masked-LM head with the output projection tied to the token embedding.

Shape legend: B batch, T sequence length, P predictions per sequence,
H hidden size, V vocabulary size.
"""

import keras
from keras import ops

from keras_bert_impl.layers.activations import ACTIVATIONS, get_activation
from keras_bert_impl.layers.sublayer_config import deserialize_sublayers
from keras_bert_impl.validation import check_choice


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MaskedLMHead(keras.layers.Layer):
    """Gathers the masked positions, then Dense(H) + activation + LayerNorm,
    then logits = x E^T + b with E the (shared) token embedding matrix.

    Args:
        token_embedding: the `keras.layers.Embedding` whose matrix [V, H] is
            reused as the output projection (BERT ties them).
        activation: str. Transform activation ("gelu" exact, "gelu_approximate").
        layer_norm_epsilon: float.
        initializer_range: float.

    Call args:
        sequence_output: [B, T, H]. mask_positions: int [B, P], indices into T.

    Example:
    >>> embedding = keras.layers.Embedding(100, 8)
    >>> embedding.build((None,))
    >>> head = MaskedLMHead(embedding)
    >>> head(ops.ones((2, 5, 8)), ops.zeros((2, 3), "int32")).shape
    TensorShape([2, 3, 100])
    """

    def __init__(
        self, token_embedding, activation="gelu", layer_norm_epsilon=1e-12, initializer_range=0.02, **kwargs
    ):
        super().__init__(**kwargs)
        if not isinstance(token_embedding, keras.layers.Embedding):
            raise ValueError(
                "token_embedding must be the keras.layers.Embedding to tie the output projection to "
                f"(e.g. backbone.token_embedding). Received: token_embedding={token_embedding!r}"
            )
        check_choice("activation", activation, ACTIVATIONS)
        self.token_embedding = token_embedding
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="layer_norm", dtype=self.dtype_policy
        )

    def build(self, sequence_output_shape, mask_positions_shape=None):
        hidden_dim = sequence_output_shape[-1]
        self.dense = keras.layers.Dense(
            hidden_dim,
            activation=get_activation(self.activation),
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
            name="dense",
            dtype=self.dtype_policy,
        )
        self.dense.build((None, None, hidden_dim))
        self.layer_norm.build((None, None, hidden_dim))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.token_embedding.input_dim,), initializer="zeros"
        )
        self.built = True

    def call(self, sequence_output, mask_positions):
        positions = ops.expand_dims(ops.cast(mask_positions, "int32"), -1)  # [B, P, 1]
        x = ops.take_along_axis(sequence_output, positions, axis=1)  # [B, P, H]
        batch, predictions, hidden = ops.shape(x)[0], ops.shape(x)[1], ops.shape(x)[2]
        # 2-D from here on, as in the encoder blocks: on TensorFlow a Dense or matmul on a
        # 3-D input is reshape -> MatMul -> reshape, which keeps the [B*P, V] bias add
        # (the largest elementwise op of a pretraining step) out of the MatMul's fusion.
        x = ops.reshape(x, (-1, hidden))  # [B*P, H]
        x = self.layer_norm(self.dense(x))
        embeddings = ops.cast(_float_embedding_matrix(self.token_embedding), x.dtype)  # [V, H]
        logits = ops.einsum("nh,vh->nv", x, embeddings) + ops.cast(self.output_bias, x.dtype)  # [B*P, V]
        return ops.reshape(logits, (batch, predictions, -1))  # [B, P, V]

    def compute_output_shape(self, sequence_output_shape, mask_positions_shape):
        return tuple(mask_positions_shape) + (self.token_embedding.input_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "token_embedding": keras.layers.serialize(self.token_embedding),
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer_range": self.initializer_range,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**deserialize_sublayers(config, "token_embedding"))


def _float_embedding_matrix(embedding):
    """The [V, H] matrix of a `keras.layers.Embedding`, dequantized if Keras' int8
    quantization replaced it (the masked-LM head multiplies by the whole matrix, which
    Keras' quantized Embedding never does itself)."""
    mode = embedding.quantization_mode
    if mode is None:
        return embedding.embeddings
    if mode == "int8":
        # Keras' int8 Embedding stores round(E * scale) with one scale per row.
        return ops.divide(
            ops.cast(embedding.embeddings, embedding.compute_dtype),
            ops.expand_dims(ops.cast(embedding.embeddings_scale, embedding.compute_dtype), -1),
        )
    raise ValueError(
        f"The masked-LM head is tied to the token embedding '{embedding.path}', quantized with mode "
        f"{mode!r}; only int8 (or no quantization) can be multiplied as a whole matrix. Quantize with "
        "mode='int8', or pass filters= to model.quantize to leave the token embedding in float."
    )
