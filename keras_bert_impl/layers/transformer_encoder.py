"""Post-LayerNorm Transformer encoder block, as in BERT.

    x = LayerNorm(x + Dropout(SelfAttention(x)))
    x = LayerNorm(x + Dropout(FeedForward(x)))

Shape legend: B batch, T sequence length, H hidden size, N heads.
"""

import keras
from keras import ops

from keras_bert_impl.layers.activations import ACTIVATIONS
from keras_bert_impl.layers.feed_forward import FeedForward
from keras_bert_impl.layers.multi_head_attention import MultiHeadAttention
from keras_bert_impl.validation import check_bool, check_choice, check_positive_int, check_probability


def _fused_kernels_run(*tensors):
    from keras_bert_impl.kernels.fused_choice import fused_kernels_run

    return fused_kernels_run(*tensors)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class TransformerEncoder(keras.layers.Layer):
    """One BERT encoder layer (post-LayerNorm residual blocks).

    Args:
        num_heads: int. Attention heads; must divide the input width.
        intermediate_dim: int. Feed-forward inner width.
        dropout: float. Dropout on each sublayer's output before the residual add.
        attention_dropout: float or None. Dropout on attention probabilities;
            defaults to `dropout` (BERT uses 0.1 for both).
        activation: str. Feed-forward activation (see `FeedForward`).
        layer_norm_epsilon: float.
        initializer_range: float.
        fused_kernels: bool. On the JAX backend on a GPU, run the residual add + dropout +
            LayerNorm ends of both sublayers, the feed-forward's bias + exact GELU and the
            attention's Q/K/V split as the Pallas kernels of `keras_bert_impl.kernels`
            (forward and backward); elsewhere, and by default, the `keras.ops` path. The
            weights are the same either way.

    Call args:
        x: [B, T, H]. padding_mask: optional [B, T] (1 = token, 0 = padding).
        attention_mask: optional [B, T, T]. use_causal_mask: bool.
        return_attention_scores: bool; also return probabilities [B, N, T, T].

    Example:
    >>> block = TransformerEncoder(num_heads=2, intermediate_dim=32)
    >>> block(keras.ops.ones((2, 5, 8)), padding_mask=keras.ops.ones((2, 5))).shape
    TensorShape([2, 5, 8])
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.1,
        attention_dropout=None,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        fused_kernels=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("intermediate_dim", intermediate_dim)
        check_probability("dropout", dropout)
        if attention_dropout is not None:
            check_probability("attention_dropout", attention_dropout)
        check_choice("activation", activation, ACTIVATIONS)
        check_bool("fused_kernels", fused_kernels)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.fused_kernels = fused_kernels

        self.feed_forward = FeedForward(
            intermediate_dim,
            activation=activation,
            initializer_range=initializer_range,
            fused_kernels=fused_kernels,
            name="feed_forward",
            dtype=self.dtype_policy,
        )
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="attention_layer_norm", dtype=self.dtype_policy
        )
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="output_layer_norm", dtype=self.dtype_policy
        )
        self.attention_output_dropout = keras.layers.Dropout(
            dropout, name="attention_output_dropout", dtype=self.dtype_policy
        )
        self.output_dropout = keras.layers.Dropout(dropout, name="output_dropout", dtype=self.dtype_policy)

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        self.attention = MultiHeadAttention(
            self.num_heads,
            hidden_dim,
            dropout=self.dropout if self.attention_dropout is None else self.attention_dropout,
            initializer_range=self.initializer_range,
            fused_kernels=self.fused_kernels,
            name="attention",
            dtype=self.dtype_policy,
        )
        self.attention.build(input_shape)
        self.attention_layer_norm.build(input_shape)
        self.feed_forward.build(input_shape)
        self.output_layer_norm.build(input_shape)
        self.built = True

    def call(
        self,
        x,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
    ):
        batch, length, hidden = ops.shape(x)[0], ops.shape(x)[1], x.shape[-1]
        # The block works on flat tokens [B*T, H]: every Dense is then a plain 2-D
        # MatMul that TensorFlow fuses with its bias, activation and residual add.
        flat = ops.reshape(x, (-1, hidden))
        attended, probs = self.attention.attend_flat(
            flat,
            batch=batch,
            query_length=length,
            key_length=length,
            padding_mask=padding_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            return_probs=return_attention_scores,
            training=training,
        )
        if self.fused_kernels and _fused_kernels_run(flat):
            flat = self._fused_residual_norm(
                attended, flat, self.attention_output_dropout, self.attention_layer_norm, training
            )
            flat = self._fused_residual_norm(
                self.feed_forward(flat), flat, self.output_dropout, self.output_layer_norm, training
            )
        else:
            flat = self.attention_layer_norm(
                flat + self.attention_output_dropout(attended, training=training)
            )
            flat = self.output_layer_norm(
                flat + self.output_dropout(self.feed_forward(flat), training=training)
            )
        x = ops.reshape(flat, (-1, length, hidden))  # [B, T, H]
        if return_attention_scores:
            return x, probs
        return x

    def _fused_residual_norm(self, x, residual, dropout, layer_norm, training):
        """layer_norm(residual + dropout(x)) as one Pallas kernel. The mask's seed is drawn from
        the Dropout layer's own seed generator, so the model's variables are the same as on the
        keras.ops path (JAX's `training` is a Python bool)."""
        from keras_bert_impl.kernels.fused_choice import interpret_mode
        from keras_bert_impl.kernels.residual_layer_norm import residual_dropout_layer_norm

        rate = float(dropout.rate) if training else 0.0
        seed = (
            keras.random.randint((1,), 0, 2**31 - 1, seed=dropout.seed_generator, dtype="int32")
            if rate > 0
            else ops.zeros((1,), "int32")
        )
        gamma, beta = (
            ops.convert_to_tensor(layer_norm.gamma),
            ops.convert_to_tensor(layer_norm.beta),
        )  # float32
        return residual_dropout_layer_norm(
            x, ops.cast(residual, x.dtype), gamma, beta, seed, rate, layer_norm.epsilon, interpret_mode()
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer_range": self.initializer_range,
                "fused_kernels": self.fused_kernels,
            }
        )
        return config
