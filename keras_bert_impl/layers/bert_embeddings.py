"""Token + segment + position embeddings, then LayerNorm and dropout.

Shape legend: B batch, T sequence length, H hidden size, V vocabulary size.
"""

import math

import keras
from keras import ops

from keras_bert_impl.validation import check_choice, check_positive_int, check_probability

POSITION_EMBEDDINGS = ("learned", "sinusoidal")


def sinusoidal_positions(length, hidden_dim, dtype="float32"):
    """The Transformer's fixed encoding: PE[p, 2i] = sin(p / 10000^(2i/H)),
    PE[p, 2i+1] = cos(p / 10000^(2i/H)). Returns [length, hidden_dim]."""
    positions = ops.expand_dims(ops.cast(ops.arange(length), "float32"), 1)  # [T, 1]
    inv_freq = ops.exp(
        ops.cast(ops.arange(0, hidden_dim, 2), "float32") * (-math.log(10000.0) / hidden_dim)
    )  # [H/2]
    angles = positions * ops.expand_dims(inv_freq, 0)  # [T, H/2]
    # Interleave so even columns hold sin and odd columns cos, as in the paper.
    encoding = ops.reshape(ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1), (length, hidden_dim))
    return ops.cast(encoding, dtype)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertEmbeddings(keras.layers.Layer):
    """BERT's input embeddings: token + segment + position, LayerNorm, dropout.

    Args:
        vocabulary_size: int. Number of WordPiece ids.
        hidden_dim: int. Embedding width H.
        max_sequence_length: int. Longest sequence the position table covers.
        num_segments: int. Number of segment (token type) ids.
        position_embedding: `"learned"` (BERT) or `"sinusoidal"` (the fixed
            encoding of "Attention Is All You Need"; no weights).
        dropout: float. Dropout rate after the LayerNorm.
        layer_norm_epsilon: float.
        initializer_range: float. Stddev of the truncated-normal initializer.

    Example:
    >>> layer = BertEmbeddings(vocabulary_size=100, hidden_dim=16, max_sequence_length=8)
    >>> layer(ops.ones((2, 8), "int32"), ops.zeros((2, 8), "int32")).shape
    TensorShape([2, 8, 16])
    """

    def __init__(
        self,
        vocabulary_size,
        hidden_dim,
        max_sequence_length=512,
        num_segments=2,
        position_embedding="learned",
        dropout=0.1,
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("vocabulary_size", vocabulary_size)
        check_positive_int("hidden_dim", hidden_dim)
        check_positive_int("max_sequence_length", max_sequence_length)
        check_positive_int("num_segments", num_segments)
        check_choice("position_embedding", position_embedding, POSITION_EMBEDDINGS)
        check_probability("dropout", dropout)
        if position_embedding == "sinusoidal" and hidden_dim % 2:
            raise ValueError(
                f"Sinusoidal position embeddings need an even hidden_dim. Received: hidden_dim={hidden_dim}"
            )
        self.vocabulary_size = vocabulary_size
        self.hidden_dim = hidden_dim
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.position_embedding = position_embedding
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)

        def embedding(rows, name):
            return keras.layers.Embedding(
                rows, hidden_dim, embeddings_initializer=initializer, name=name, dtype=self.dtype_policy
            )

        self.token_embedding = embedding(vocabulary_size, "token_embedding")
        self.segment_embedding = embedding(num_segments, "segment_embedding")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="layer_norm", dtype=self.dtype_policy
        )
        self.dropout_layer = keras.layers.Dropout(dropout, name="dropout", dtype=self.dtype_policy)

    def build(self, token_ids_shape, segment_ids_shape=None):
        self.token_embedding.build(token_ids_shape)
        self.segment_embedding.build(token_ids_shape)
        if self.position_embedding == "learned":
            self.position_embeddings = self.add_weight(
                name="position_embeddings",
                shape=(self.max_sequence_length, self.hidden_dim),
                initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
            )
        self.layer_norm.build(tuple(token_ids_shape) + (self.hidden_dim,))
        self.built = True

    def call(self, token_ids, segment_ids, training=None):
        length = ops.shape(token_ids)[1]
        x = self.token_embedding(token_ids) + self.segment_embedding(segment_ids)  # [B, T, H]
        if self.position_embedding == "learned":
            # .value, not the variable: JAX refuses a Keras variable as an operand of a traced op
            # ("Triggering __jax_array__() during abstractification is no longer supported").
            positions = ops.slice(self.position_embeddings.value, (0, 0), (length, self.hidden_dim))
        else:
            positions = sinusoidal_positions(length, self.hidden_dim, self.compute_dtype)
        x = x + ops.expand_dims(ops.cast(positions, x.dtype), 0)  # [B, T, H]
        x = self.layer_norm(x)
        return self.dropout_layer(x, training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "hidden_dim": self.hidden_dim,
                "max_sequence_length": self.max_sequence_length,
                "num_segments": self.num_segments,
                "position_embedding": self.position_embedding,
                "dropout": self.dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer_range": self.initializer_range,
            }
        )
        return config
