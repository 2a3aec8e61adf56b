"""Multi-head scaled dot-product attention, BERT's self- and cross-attention.

Shape legend: B batch, F query length, T key/value length, H hidden size,
N heads, D head size (H = N * D).
"""

import math

import keras
from keras import ops

from keras_bert_impl.layers.validation import check_divisible, check_positive_int, check_probability

# Added to masked scores before the softmax. The softmax runs in float32 (see
# call), so a finite value this large drives masked probabilities to exactly 0
# without producing inf - inf = NaN.
MASK_VALUE = -1e9


def merge_masks(padding_mask, attention_mask, use_causal_mask, query_length, key_length):
    """Combines the optional masks into one boolean [B or 1, 1 or F, T] mask (True = attend),
    or None when there is nothing to mask."""
    mask = None
    if padding_mask is not None:
        mask = ops.cast(padding_mask, "bool")[:, None, :]  # [B, 1, T]
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
        if len(attention_mask.shape) == 2:  # a [B, T] padding-style mask
            attention_mask = attention_mask[:, None, :]
        mask = attention_mask if mask is None else ops.logical_and(mask, attention_mask)
    if use_causal_mask:
        rows = ops.arange(query_length)[:, None]  # [F, 1]
        cols = ops.arange(key_length)[None, :]  # [1, T]
        causal = ops.greater_equal(rows, cols)[None, :, :]  # [1, F, T]: key j visible from query i iff j <= i
        mask = causal if mask is None else ops.logical_and(mask, causal)
    return mask


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MultiHeadAttention(keras.layers.Layer):
    """softmax(Q K^T / sqrt(D)) V over N heads, with padding, causal and cross-attention.

    Q comes from `query`; K and V from `value` (and `key` if given), so passing a
    second sequence as `value` gives cross-attention.

    Args:
        num_heads: int. Number of heads N.
        hidden_dim: int. Width H of the projections and the output; H % N == 0.
        dropout: float. Dropout on the attention probabilities.
        initializer_range: float. Stddev of the truncated-normal kernel initializer.

    Call args:
        query: [B, F, Hq]. value: [B, T, Hv] (defaults to query). key: defaults to value.
        padding_mask: optional [B, T], 1 for real key tokens, 0 for padding.
        attention_mask: optional [B, F, T] or [B, T] boolean/0-1 mask, True = attend.
        use_causal_mask: bool. Blocks every key position after the query position.
        return_attention_scores: bool. Also return the probabilities [B, N, F, T].

    Example:
    >>> layer = MultiHeadAttention(num_heads=2, hidden_dim=8)
    >>> x = ops.ones((1, 5, 8))
    >>> out, probs = layer(x, use_causal_mask=True, return_attention_scores=True)
    >>> probs.shape
    (1, 2, 5, 5)
    """

    def __init__(self, num_heads, hidden_dim, dropout=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("hidden_dim", hidden_dim)
        check_divisible(hidden_dim, num_heads)
        check_probability("dropout", dropout)
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.head_dim = hidden_dim // num_heads

        def dense(name):
            return keras.layers.Dense(
                hidden_dim,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                name=name,
                dtype=self.dtype_policy,
            )

        self.query_dense = dense("query")
        self.key_dense = dense("key")
        self.value_dense = dense("value")
        self.output_dense = dense("attention_output")
        self.dropout_layer = keras.layers.Dropout(dropout, name="attention_dropout", dtype=self.dtype_policy)

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        self.query_dense.build(query_shape)
        self.key_dense.build(key_shape)
        self.value_dense.build(value_shape)
        self.output_dense.build(tuple(query_shape[:-1]) + (self.hidden_dim,))
        self.built = True

    def _split_heads(self, x):
        # [B, S, H] -> [B, N, S, D]
        x = ops.reshape(x, (-1, ops.shape(x)[1], self.num_heads, self.head_dim))
        return ops.transpose(x, (0, 2, 1, 3))

    def call(
        self,
        query,
        value=None,
        key=None,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
    ):
        value = query if value is None else value
        key = value if key is None else key
        # Scaling Q before the product touches B*N*F*D numbers instead of B*N*F*T.
        q = self._split_heads(self.query_dense(query)) * ops.cast(1.0 / math.sqrt(self.head_dim), query.dtype)
        k = self._split_heads(self.key_dense(key))  # [B, N, T, D]
        v = self._split_heads(self.value_dense(value))  # [B, N, T, D]
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # [B, N, F, T]

        # Softmax in float32 so bfloat16/float16 policies neither overflow the
        # mask value nor lose the small probabilities.
        scores = ops.cast(scores, "float32")
        mask = merge_masks(padding_mask, attention_mask, use_causal_mask, ops.shape(query)[1], ops.shape(key)[1])
        if mask is not None:
            scores = scores + (1.0 - ops.cast(mask[:, None, :, :], "float32")) * MASK_VALUE
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)  # [B, N, F, T]

        context = ops.matmul(self.dropout_layer(probs, training=training), v)  # [B, N, F, D]
        context = ops.transpose(context, (0, 2, 1, 3))  # [B, F, N, D]
        context = ops.reshape(context, (-1, ops.shape(context)[1], self.hidden_dim))  # [B, F, H]
        output = self.output_dense(context)
        if return_attention_scores:
            return output, probs
        return output

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "dropout": self.dropout,
                "initializer_range": self.initializer_range,
            }
        )
        return config
