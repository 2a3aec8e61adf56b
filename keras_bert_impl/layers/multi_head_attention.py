"""Multi-head scaled dot-product attention, BERT's self- and cross-attention.

Shape legend: B batch, F query length, T key/value length, H hidden size,
N heads, D head size (H = N * D).
"""

import math

import keras
from keras import ops

from keras_bert_impl.layers.masking import mask_bias, merge_masks
from keras_bert_impl.validation import check_bool, check_divisible, check_positive_int, check_probability


def _fused_attention_runs(dtype):
    """Whether `ops.dot_product_attention` is taken for inputs of `dtype`: on JAX only, and
    not for float16 on a CPU, where XLA has no float16 x float16 -> float32 dot that JAX's
    attention asks for ("The precision 'F16_F16_F32' is not supported by dot_general on
    CPU": every compiled call of a mixed_float16 model failed there)."""
    if keras.backend.backend() != "jax":
        return False
    if keras.backend.standardize_dtype(dtype) != "float16":
        return True
    import jax

    return jax.default_backend() != "cpu"


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
        fused_kernels: bool. Where the fused `ops.dot_product_attention` runs and the kernels of
            `keras_bert_impl.kernels` do (JAX on a GPU), the merged Q/K/V projection is split
            straight into the [B, T, N, D] layout that op takes, without the transposes to
            [B, N, T, D] and back. Off by default.

    Call args:
        query: [B, F, Hq]. value: [B, T, Hv] (defaults to query). key: defaults to value.
        padding_mask: optional [B, T], 1 for real key tokens, 0 for padding.
        attention_mask: optional [B, F, T] or [B, T] boolean/0-1 mask, True = attend.
        use_causal_mask: bool. Blocks every key position after the query position.
        return_attention_scores: bool. Also return the probabilities [B, N, F, T].

    Example:
    >>> layer = MultiHeadAttention(num_heads=2, hidden_dim=8)
    >>> x = ops.ones((1, 4, 8))
    >>> out, probs = layer(x, use_causal_mask=True, return_attention_scores=True)
    >>> out.shape, probs.shape
    (TensorShape([1, 4, 8]), TensorShape([1, 2, 4, 4]))
    >>> ops.convert_to_numpy(probs)[0, 0].round(2)  # head 0: token i attends to tokens 0..i only
    array([[1.  , 0.  , 0.  , 0.  ],
           [0.5 , 0.5 , 0.  , 0.  ],
           [0.33, 0.33, 0.33, 0.  ],
           [0.25, 0.25, 0.25, 0.25]], dtype=float32)
    """

    def __init__(
        self, num_heads, hidden_dim, dropout=0.0, initializer_range=0.02, fused_kernels=False, **kwargs
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("hidden_dim", hidden_dim)
        check_divisible(hidden_dim, num_heads)
        check_probability("dropout", dropout)
        check_bool("fused_kernels", fused_kernels)
        self.fused_kernels = fused_kernels
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
        self_attention = value is None and key is None
        value = query if value is None else value
        key = value if key is None else key
        batch, query_length, key_length = ops.shape(query)[0], ops.shape(query)[1], ops.shape(key)[1]
        output, probs = self.attend_flat(
            ops.reshape(query, (-1, query.shape[-1])),
            key=None if self_attention else ops.reshape(key, (-1, key.shape[-1])),
            value=None if self_attention else ops.reshape(value, (-1, value.shape[-1])),
            batch=batch,
            query_length=query_length,
            key_length=key_length,
            padding_mask=padding_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            return_probs=return_attention_scores,
            training=training,
        )
        output = ops.reshape(output, (-1, query_length, self.hidden_dim))  # [B, F, H]
        if return_attention_scores:
            return output, probs
        return output

    def attend_flat(
        self,
        query,
        *,
        key=None,
        value=None,
        batch,
        query_length,
        key_length,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_probs=True,
        training=None,
    ):
        """Attention on flattened tokens: query [B*F, Hq], key/value [B*T, Hk] (both None
        for self-attention). Returns (output [B*F, H], probabilities [B, N, F, T] or None).

        Every argument after `query` is keyword-only. `batch`, `query_length` and
        `key_length` (B, F, T, ints or scalar tensors) restore the shapes the flat
        tokens lost; the masks and `training` are those of `call`. With
        `return_probs=False` the probabilities may be None: on the JAX backend, when no
        dropout applies to them (and but for float16 on a CPU), the attention is then one fused
        `ops.dot_product_attention` (cuDNN's flash attention on a GPU), which never
        writes the [B, N, F, T] scores to memory.

        Why flat: on TensorFlow a Dense on a 2-D input is one MatMul that oneDNN fuses
        with its bias (and the encoder's residual adds), while a 3-D input goes through
        reshape -> MatMul -> reshape and loses the fusion (bench/README.md). The
        Transformer encoder block keeps its tokens flat and calls this directly.
        """
        n, d = self.num_heads, self.head_dim
        scale = 1.0 / math.sqrt(d)

        def heads(x, length):  # [B*S, H] -> [B, N, S, D]
            return ops.transpose(ops.reshape(x, (batch, length, n, d)), (0, 2, 1, 3))

        projections = (self.query_dense, self.key_dense, self.value_dense)
        if key is None and all(layer.quantization_mode is None for layer in projections):
            # Self-attention: one [H, 3H] projection instead of three, with the
            # 1/sqrt(D) scale folded into the query weights. The three Dense
            # layers keep their own variables (checkpoints map to them). Layers
            # quantized by Keras' model.quantize hold integer kernels with scales,
            # which only their own call applies: they take the path below.
            q_scale = ops.cast(scale, self.query_dense.kernel.dtype)
            kernel = ops.concatenate(
                [self.query_dense.kernel * q_scale, self.key_dense.kernel, self.value_dense.kernel], axis=1
            )  # [H, 3H]
            bias = ops.concatenate(
                [self.query_dense.bias * q_scale, self.key_dense.bias, self.value_dense.bias], axis=0
            )
            qkv = ops.matmul(query, ops.cast(kernel, query.dtype)) + ops.cast(bias, query.dtype)  # [B*T, 3H]
            if self._split_for_fused_attention(qkv, return_probs, training):
                # Straight into [B, T, N, D] each: one copy per projection out of the GEMM's
                # output (cuDNN's attention takes its operands from memory, so a copy is the
                # least any split costs; a Pallas kernel could do no less), and its backward one
                # concatenation.
                q, k, v = ops.unstack(ops.reshape(qkv, (batch, query_length, 3, n, d)), 3, axis=2)
                mask = merge_masks(padding_mask, attention_mask, use_causal_mask, query_length, key_length)
                return self._fused_attention(q, k, v, mask, batch, query_length, key_length), None
            qkv = ops.transpose(
                ops.reshape(qkv, (batch, query_length, 3, n, d)), (2, 0, 3, 1, 4)
            )  # [3, B, N, T, D]
            # unstack, not qkv[0], qkv[1], qkv[2]: the gradient of each strided slice is a
            # zero-filled [3, B, N, T, D] tensor, summed three times (a fifth of a bert_tiny
            # training step in bench/perf/pretraining_speed.py's profile); unstack's is one stack.
            q, k, v = ops.unstack(qkv, 3, axis=0)
        else:
            key = query if key is None else key
            value = query if value is None else value
            q = heads(self.query_dense(query), query_length) * ops.cast(scale, query.dtype)  # [B, N, F, D]
            k = heads(self.key_dense(key), key_length)  # [B, N, T, D]
            v = heads(self.value_dense(value), key_length)  # [B, N, T, D]
        mask = merge_masks(padding_mask, attention_mask, use_causal_mask, query_length, key_length)
        if (
            not return_probs
            and _fused_attention_runs(q.dtype)
            and not (self.dropout > 0 and training)  # JAX's `training` is a Python bool
        ):
            # Only on JAX: on TensorFlow the explicit form below is what the SavedModel and
            # TFLite exports are proven on, op for op. The fused op takes [B, S, N, D];
            # cuDNN wants the mask at its full [B, 1, F, T] (it checks the bias' lengths);
            # the scale is already folded into q.
            return self._fused_attention(
                ops.transpose(q, (0, 2, 1, 3)),
                ops.transpose(k, (0, 2, 1, 3)),
                ops.transpose(v, (0, 2, 1, 3)),
                mask,
                batch,
                query_length,
                key_length,
            ), None
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # [B, N, F, T]

        # Softmax in float32 so bfloat16/float16 policies neither overflow the
        # mask value nor lose the small probabilities.
        scores = ops.cast(scores, "float32")
        if mask is not None:
            scores = scores + mask_bias(ops.expand_dims(mask, 1))  # [B or 1, 1, F or 1, T]
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)  # [B, N, F, T]

        context = ops.matmul(self.dropout_layer(probs, training=training), v)  # [B, N, F, D]
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (-1, self.hidden_dim))  # [B*F, H]
        return self.output_dense(context), probs

    def _fused_attention(self, q, k, v, mask, batch, query_length, key_length):
        """`ops.dot_product_attention` of q [B, F, N, D] (scale folded in), k and v [B, T, N, D],
        under merge_masks' mask; returns the projected output [B*F, H]."""
        if mask is not None:
            mask = ops.broadcast_to(ops.expand_dims(mask, 1), (batch, 1, query_length, key_length))
        context = ops.dot_product_attention(q, k, v, mask=mask, scale=1.0)  # [B, F, N, D]
        return self.output_dense(ops.reshape(context, (-1, self.hidden_dim)))

    def _split_for_fused_attention(self, qkv, return_probs, training):
        """Whether self-attention takes the fused_kernels split: the fused attention runs (see
        attend_flat) and so do the Pallas kernels."""
        if not (
            self.fused_kernels
            and not return_probs
            and _fused_attention_runs(qkv.dtype)
            and not (self.dropout > 0 and training)
        ):
            return False
        from keras_bert_impl.kernels.fused_choice import fused_kernels_run

        return fused_kernels_run(qkv)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "dropout": self.dropout,
                "initializer_range": self.initializer_range,
                "fused_kernels": self.fused_kernels,
            }
        )
        return config
