"""A `BertClassifier`'s inference pass written in the forms an integer-only TFLite takes whole,
once, for the two places that need exactly the same computation: the integer-only export
(`conversion/integer_only.py` traces it at a static [1, S] over the weights as constants) and
quantization-aware training (`QuantizationAwareClassifier` runs it batched over the variables,
with fake quantization where the integer file quantizes).

Why forms of its own, and not the Keras layers: TF 2.20's full-integer quantizer leaves parts
of the Keras graph in float or refuses them (issue 31, measured on a one-layer model of our
layers): Keras' LayerNormalization lowers to a NEG that stays float and has no int16 kernel, its
variance is a SQUARED_DIFFERENCE LiteRT refuses in int16, the padding mask's bool -> float32
cast stays float, and `ops.take`'s index check makes the 16x8 converter ask for the range of the
dynamic id input. Here:

- LayerNorm is MEAN, SUB, MUL, RSQRT (no NEG, no SQUARED_DIFFERENCE), each token rescaled by
  an ABS, MAX and RSQRT of its own peak before its variance (`_norm` says why);
- the embeddings are lookups on the int32 ids (`IntegerForms.lookup`: the export's is a plain
  GATHER with no index check), the positions a table slice;
- the padding mask is a lookup too: the int32 mask indexes the two-entry table
  [INTEGER_MASK_VALUE, 0], so no cast and no comparison; attention adds it before SOFTMAX;
- the token mean (`pooling="mean"`) is a SOFTMAX of that same bias times the tokens, so the
  1 / count needs neither a cast of the mask nor a DIV.

INTEGER_MASK_VALUE is -30, not the Keras model's -1e9 (layers/masking.py): the bias shares one
quantization scale with the attention scores it is added to, and -1e9 would leave those scores
no levels at all. A masked key weighs exp(-30) = 9e-14 times a real key of the same score, so
the float forward stays within 1e-5 of Keras (tested on MR sentences).

Every tensor the integer file quantizes passes through `forms.activation(name, x)` under a
name of its own (`quantization_points` lists them): identity for a float forward, a fake
quantization with learned ranges in training and in the export of a trained model. There is no
dropout: the forward is the inference pass, and QAT tracks the ranges of inference-time
activations (dropout's 1 / (1 - rate) would widen them).
"""

import keras
import numpy as np
from keras import ops

from keras_bert_impl.layers.bert_embeddings import sinusoidal_positions

# Added to attention scores (and the token mean's weights) at padding: see the module docstring.
INTEGER_MASK_VALUE = -30.0
# TFLite's int8 SOFTMAX (and LOGISTIC) output scale is fixed at 1/256 from 0; TANH's at 1/128
# around 0. Fake quantization at these ranges is exactly what the int8 kernels give.
PROBABILITY_RANGE = (0.0, 255.0 / 256.0)
TANH_RANGE = (-1.0, 127.0 / 128.0)
# Looked up by the padding mask: the attention bias of a padded (0) and a real (1) token.
MASK_TABLE = np.array([INTEGER_MASK_VALUE, 0.0], "float32")


class IntegerForms:
    """The hooks `classifier_forward` computes through. This base gives the plain float
    forward of the variables (a Keras `ops.take` lookup, no quantization); the export and
    quantization-aware training subclass it.

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100)
    >>> model = kb.BertClassifier(backbone, num_classes=2)
    >>> ids = np.array([[2, 7, 3, 0]], "int32")
    >>> inputs = {"token_ids": ids, "padding_mask": ids > 0, "segment_ids": np.zeros_like(ids)}
    >>> logits = classifier_forward(model, inputs, IntegerForms())["logits"]
    >>> bool(np.allclose(logits, model(inputs)["logits"], atol=1e-5))
    True
    """

    # Added to attention scores at padding (the module docstring says why -30 here).
    mask_value = INTEGER_MASK_VALUE

    def weight(self, variable):
        """A weight as the forward reads it (a bias; the scale of a LayerNorm)."""
        return variable

    def kernel(self, variable):
        """A Dense kernel [in, out] (the integer file stores it per output channel in int8)."""
        return self.weight(variable)

    def table(self, values):
        """A constant operand of the forward: positions, LayerNorm's gamma and beta."""
        return values

    def lookup(self, table, indices):
        """Rows of `table` (an embedding, the mask table) at the int32 `indices`."""
        return ops.take(self.table(table), indices, axis=0)

    def activation(self, name, x):
        """A tensor the integer file quantizes, under its point `name`."""
        return x

    def inverse_sqrt(self, name, x):
        """LayerNorm's 1 / sqrt(variance + epsilon), a point `name` of its own: in int8 a
        variance can round to 0, and TFLite's int8 RSQRT then gives the top of its range."""
        return self.activation(name, ops.rsqrt(x))

    def fixed(self, x, bounds):
        """A tensor whose int8 range the kernel fixes (softmax, tanh): `bounds`."""
        return x

    def first_token(self, x, source):  # x [B, S, H] on the grid of `source` -> [B, H]
        """The [CLS] row of each sequence, which the pooled head reads."""
        return x[:, 0]

    # The three ops below are those whose int8 kernels requantize an integer accumulator to
    # their output's grid. Each names where its operands lie (its source): a point, the `bounds`
    # of a fixed range, ("table", values) for a constant operand (`table`'s output), whose
    # grid the file takes from its values, or ("rows", table) for rows `lookup` gives;
    # quantization-aware inference recomputes them as the kernels do.
    def dense(self, name, layer, x, source):
        """FULLY_CONNECTED: x [M, in] (on the grid of `source`) times the Dense `layer`'s kernel
        plus its bias, at point `name`."""
        # ops.add, not `+`: on TensorFlow it adds a bias as BiasAdd, the form grappler fuses with
        # the MatMul and an exact GELU into one oneDNN kernel (inference/onednn_forms.py). TFLite's
        # converter folds either into FULLY_CONNECTED: the int8, float32 and integer-only files of
        # bert_tiny kept their ops and their sizes to the byte.
        return self.activation(
            name, ops.add(ops.matmul(x, self.kernel(layer.kernel)), self.weight(layer.bias))
        )

    def matmul(self, name, a, a_source, b, b_source):
        """BATCH_MATMUL a [..., M, K] @ b [..., K, N] (on the grids of their sources), at point `name`."""
        return self.activation(name, ops.matmul(a, b))

    def add(self, name, a, a_source, b, b_source):
        """ADD a + b (on the grids of their sources), at point `name`."""
        return self.activation(name, a + b)

    def mean(self, name, x, source):
        """MEAN of x [..., H] (on the grid of `source`) over its last axis, kept, at point `name`."""
        return self.activation(name, ops.mean(x, axis=-1, keepdims=True))

    def norm(self, name, layer, x):
        """The LayerNorm `layer` of x [..., H], point `name`: the rescaled form of `_norm`,
        which the integer file needs (a float graph on XNNPACK takes a leaner one:
        inference/litert_forms.py)."""
        return _norm(self, name, layer, x)


def classifier_forward(model, inputs, forms, probabilities=False):
    """`{logits or probabilities: [B, C]}` of the `BertClassifier` `model` on `inputs`
    ({token_ids, padding_mask, segment_ids}: [B, S] each), computed in the integer forms of
    the module docstring through `forms` (an `IntegerForms`).

    probabilities: bool. Give `probabilities`, a softmax of the logits (a sigmoid for a
        multi-label head), for a head without an activation of its own (MediaPipe's file).
    """
    backbone = model.backbone
    embeddings = backbone.embeddings
    ids = ops.cast(inputs["token_ids"], "int32")
    length = ids.shape[1] if ids.shape[1] is not None else ops.shape(ids)[1]
    hidden = embeddings.hidden_dim
    tokens = forms.lookup(embeddings.token_embedding.embeddings, ids)  # [B, S, H]
    segments = forms.lookup(embeddings.segment_embedding.embeddings, ops.cast(inputs["segment_ids"], "int32"))
    if embeddings.position_embedding == "learned":
        # The rows, then `table`: the file stores the [S, H] slice, on the grid of its own range.
        positions = forms.table(forms.weight(embeddings.position_embeddings)[:length])  # [S, H]
    else:
        positions = forms.table(sinusoidal_positions(length, hidden))
    x = forms.add(
        "embeddings/sum",
        tokens,
        ("rows", embeddings.token_embedding.embeddings),
        segments,
        ("rows", embeddings.segment_embedding.embeddings),
    )
    x = forms.add("embeddings/positioned", x, "embeddings/sum", positions[None], ("table", positions))
    x = ops.reshape(forms.norm("embeddings/norm", embeddings.layer_norm, x), (-1, hidden))  # [B*S, H]
    mask_table = (
        MASK_TABLE if forms.mask_value == INTEGER_MASK_VALUE else np.array([forms.mask_value, 0.0], "float32")
    )
    bias = forms.lookup(mask_table, ops.cast(inputs["padding_mask"], "int32"))  # [B, S]
    bias = ops.reshape(bias, (-1, 1, 1, length))  # [B, 1, 1, S]
    source = "embeddings/norm"
    for index, layer in enumerate(backbone.transformer_layers):
        x = _block(forms, f"layer_{index}", layer, x, bias, length, source)
        source = f"layer_{index}/output_norm"
    if model.pooling == "pooled":
        first = forms.first_token(ops.reshape(x, (-1, length, hidden)), source)  # [B, H]: [CLS]
        pooled = _dense(forms, "pooler", backbone.pooler.dense, first, source)
        source = _dense_output("pooler", backbone.pooler.dense)
    else:
        shares = forms.fixed(
            ops.softmax(ops.reshape(bias, (-1, 1, length)), axis=-1), PROBABILITY_RANGE
        )  # [B, 1, S]
        pooled = forms.matmul(
            "pooled", shares, PROBABILITY_RANGE, ops.reshape(x, (-1, length, hidden)), source
        )
        pooled = ops.reshape(pooled, (-1, hidden))  # [B, H]
        source = "pooled"
    scores = _dense(forms, "head", model.output_dense, pooled, source)  # [B, C]
    name = "logits" if model.activation is None and not probabilities else "probabilities"
    if model.activation is None and probabilities:
        # Probabilities of our own only over logits, as the Keras model's readable outputs are.
        scores = ops.sigmoid(scores) if model.multi_label else ops.softmax(scores, axis=-1)
    return {name: scores}


def quantization_points(model):
    """The names `classifier_forward` gives `forms.activation` for `model`, in order."""
    names = []

    class Recording(IntegerForms):
        def activation(self, name, x):
            names.append(name)
            return x

    ids = ops.ones((1, 2), "int32")
    classifier_forward(model, {"token_ids": ids, "padding_mask": ids, "segment_ids": ids * 0}, Recording())
    return names


def _dense(forms, name, layer, x, source):  # x [M, in] on the grid of `source` -> [M, out]
    y = forms.dense(name, layer, x, source)
    activation = layer.activation
    if activation is keras.activations.linear:
        return y
    if activation in (keras.activations.softmax, keras.activations.sigmoid):
        return forms.fixed(activation(y), PROBABILITY_RANGE)
    if activation is keras.activations.tanh:
        return forms.fixed(activation(y), TANH_RANGE)
    return forms.activation(f"{name}/activation", activation(y))


def _dense_output(name, layer):
    """Where `_dense(forms, name, layer, ...)`'s output lies: its point, or a fixed range."""
    activation = layer.activation
    if activation is keras.activations.linear:
        return name
    if activation in (keras.activations.softmax, keras.activations.sigmoid):
        return PROBABILITY_RANGE
    if activation is keras.activations.tanh:
        return TANH_RANGE
    return f"{name}/activation"


def _norm(forms, name, layer, x):  # [..., H]: LayerNorm as MEAN, SUB, MUL, RSQRT
    """LayerNorm of each token rescaled by about 1 / max|x - mean| before its variance.

    LayerNorm is the same function of c * (x - mean) for any c > 0 per token, up to the
    epsilon's weight (epsilon / c^2 in place of epsilon: nothing next to a variance at BERT's
    1e-12). In int8 it matters: the variance shares one range across every token of every
    sentence, and a [CLS] or [SEP] with a variance tens of times the others' leaves those others
    a handful of levels, which RSQRT turns into inverse deviations tens of steps apart for one
    level (issue 31: on MiniLM the integer file and its QAT forward drifted apart there;
    docs/export.md has the before and after). Rescaled by its own peak, every token's squares
    lie in [0, 1], and its variance between 1/H and 1, whatever its scale. The factor itself needs no
    precision: any c gives the same function, so 1 / peak comes from an RSQRT of peak^2 at whatever levels it
    gets.
    """
    point = forms.activation
    epsilon = float(layer.epsilon)
    # x is the point the forward names after the norm: "embeddings/positioned" for "embeddings/norm",
    # a block's "attention_residual" or "output_residual" for its "attention_norm" or "output_norm".
    source = "embeddings/positioned" if name == "embeddings/norm" else name.replace("_norm", "_residual")
    mean = forms.mean(f"{name}/mean", x, source)
    centred = point(f"{name}/centred", x - mean)
    # No point of its own after the MAX: TFLite's REDUCE_MAX (and ABS before it) keeps its
    # input's scale, so the file holds the peak on the magnitude's grid, where it already lies.
    peak = ops.max(point(f"{name}/magnitude", ops.abs(centred)), axis=-1, keepdims=True)  # [..., 1]
    peak_squared = point(f"{name}/peak_squared", peak * peak)
    factor = forms.inverse_sqrt(
        f"{name}/factor", point(f"{name}/peak_squared_epsilon", peak_squared + epsilon)
    )
    rescaled = point(f"{name}/rescaled", centred * factor)  # |.| <= 1 up to the factor's rounding
    variance = forms.mean(
        f"{name}/variance", point(f"{name}/squares", rescaled * rescaled), f"{name}/squares"
    )
    inverse = forms.inverse_sqrt(f"{name}/inverse_std", point(f"{name}/variance_epsilon", variance + epsilon))
    normalized = point(f"{name}/normalized", rescaled * inverse)
    scaled = point(f"{name}/scaled", normalized * forms.table(layer.gamma))
    beta = forms.table(layer.beta)
    return forms.add(name, scaled, f"{name}/scaled", beta, ("table", beta))


def _projections(forms, name, attention, x, length, source):
    """Attention's inputs from x [B*S, H]: the query scaled by 1/sqrt(D) [B, N, S, D], the keys
    [B, N, D, S] (ready for the scores' product) and the values [B, N, S, D], each its own
    matmul (bench/perf/forward_gap.py's ours_fp32_fused_qkv measures one [H, 3H] product
    instead)."""
    heads, head_dim = attention.num_heads, attention.head_dim

    def split(y, order):  # [B*S, H] -> [B, N, S, D] (order (0, 2, 1, 3)) or [B, N, D, S] (0, 2, 3, 1)
        return ops.transpose(ops.reshape(y, (-1, length, heads, head_dim)), order)

    scale = 1.0 / float(head_dim) ** 0.5
    query = forms.activation(
        f"{name}/query_scaled", _dense(forms, f"{name}/query", attention.query_dense, x, source) * scale
    )
    keys = split(_dense(forms, f"{name}/key", attention.key_dense, x, source), (0, 2, 3, 1))
    values = split(_dense(forms, f"{name}/value", attention.value_dense, x, source), (0, 2, 1, 3))
    return split(query, (0, 2, 1, 3)), keys, values


def _block(forms, name, layer, x, bias, length, source):
    """One post-LN TransformerEncoder on x [B*S, H] (on the grid of `source`; bias [B, 1, 1, S])."""
    attention = layer.attention
    heads, head_dim = attention.num_heads, attention.head_dim
    query, keys, values = _projections(forms, name, attention, x, length, source)
    scores = forms.matmul(
        f"{name}/scores", query, f"{name}/query_scaled", keys, f"{name}/key"
    )  # [B, N, S, S]
    scores = forms.add(f"{name}/masked_scores", scores, f"{name}/scores", bias, ("rows", MASK_TABLE))
    weights = forms.fixed(ops.softmax(scores, axis=-1), PROBABILITY_RANGE)
    context = forms.matmul(
        f"{name}/context", weights, PROBABILITY_RANGE, values, f"{name}/value"
    )  # [B, N, S, D]
    context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (-1, heads * head_dim))  # [B*S, H]
    attended = _dense(forms, f"{name}/attention_output", attention.output_dense, context, f"{name}/context")
    residual = forms.add(f"{name}/attention_residual", x, source, attended, f"{name}/attention_output")
    x = forms.norm(f"{name}/attention_norm", layer.attention_layer_norm, residual)
    feed_forward = layer.feed_forward
    intermediate = feed_forward.intermediate_dense
    inner = _dense(
        forms, f"{name}/intermediate", intermediate, x, f"{name}/attention_norm"
    )  # [B*S, I], its GELU
    out = _dense(
        forms,
        f"{name}/output",
        feed_forward.output_dense,
        inner,
        _dense_output(f"{name}/intermediate", intermediate),
    )
    residual = forms.add(f"{name}/output_residual", x, f"{name}/attention_norm", out, f"{name}/output")
    return forms.norm(f"{name}/output_norm", layer.output_layer_norm, residual)
