"""An integer-only .tflite of a classifier: every op between the int32 id inputs and the last
DEQUANTIZE works on int8 (or int16) tensors, what phone NPUs and the Edge TPU take; and from
the same static forward, the GPU delegate's float16 file (`convert_static`, "float16_gpu").

Why a forward of its own, and not the Keras model traced (as `convert_endpoint` does for every
other file, and `Int8Forward` for `--precision int8`): TF 2.20's full-integer quantizer leaves
parts of the Keras graph in float or refuses them (issue 31, measured on a one-layer model of
our layers): Keras' LayerNormalization lowers to a NEG that stays float (DEQUANTIZE -> NEG ->
QUANTIZE) and has no int16 kernel, its variance is a SQUARED_DIFFERENCE that LiteRT 2.3.0
refuses in int16 at run time, the padding mask's bool -> float32 cast stays float, and in
16x8 mode `ops.take`'s index check (a GREATER on the ids) makes the converter ask for the
range of the dynamic id input. `integer_forward` computes the same function in forms the
quantizer takes whole, at a static [1, S]:

- LayerNorm as MEAN, SUB, MUL, RSQRT (no NEG, no SQUARED_DIFFERENCE);
- the embeddings as plain GATHERs on the int32 ids (no index check), the positions a constant;
- the padding mask as a GATHER too: the int32 mask indexes a two-entry table
  [INTEGER_MASK_VALUE, 0], so no cast and no comparison; attention adds it before SOFTMAX;
- the token mean (`pooling="mean"`) as a SOFTMAX of that same bias times the tokens, so the
  1 / count needs neither a cast of the mask nor a DIV.

INTEGER_MASK_VALUE is -30, not the Keras model's -1e9 (layers/masking.py): the bias shares one
quantization scale with the attention scores it is added to, and -1e9 would leave those scores
no levels at all. A masked key weighs exp(-30) = 9e-14 times a real key of the same score, so
the float forward stays within 1e-5 of Keras (tested on MR sentences).
"""

import numpy as np

from keras_bert_impl.backend_support import require_tensorflow

tf = require_tensorflow(
    "keras_bert_impl.conversion.integer_only (integer-only TFLite)",
    "Convert in a TensorFlow process; the .tflite runs anywhere LiteRT does.",
)

from keras_bert_impl.conversion.input_contract import (  # noqa: E402
    EXPORT_ID_INPUTS, INTEGER_ONLY_QUANTIZATIONS, STATIC_QUANTIZATIONS, id_signature, named_endpoint,
)
from keras_bert_impl.layers.bert_embeddings import sinusoidal_positions  # noqa: E402
from keras_bert_impl.validation import check_choice, check_sequence_length  # noqa: E402

# Added to attention scores (and the token mean's weights) at padding: see the module docstring.
INTEGER_MASK_VALUE = -30.0


def integer_forward(model, sequence_length, probabilities=False):
    """`(ids, mask, segment_ids) -> {logits or probabilities: float32 [1, C]}`: the classifier
    `model`'s inference pass in integer-friendly ops (module docstring), as a `tf.function`
    of int32 [1, sequence_length] tensors named as every export's inputs (`EXPORT_ID_INPUTS`).

    The weights are the model's as they are now, held as constants.

    Args:
        model: a built `BertClassifier` of this library, not quantized by Keras.
        sequence_length: int. The static length S of the inputs.
        probabilities: bool. Give `probabilities`, a softmax of the logits (a sigmoid for a
            multi-label head; what MediaPipe's TextClassifier reads), for a head without an
            activation of its own.
    """
    from keras_bert_impl.models.bert_classifier import BertClassifier

    if not isinstance(model, BertClassifier):
        raise ValueError(
            "The integer-only file is built for a BertClassifier. "
            f"Received: model={type(model).__name__}. Export other heads in float32 or dynamic_int8."
        )
    backbone = model.backbone
    if any(getattr(layer, "quantization_mode", None) for layer in model._flatten_layers()):
        raise ValueError(
            "model holds layers Keras quantized (model.quantize): the integer-only file quantizes "
            "from float weights. Convert the float model."
        )
    check_sequence_length("sequence_length", sequence_length, backbone.max_sequence_length)
    weights = _Weights()
    embeddings = backbone.embeddings
    if embeddings.position_embedding == "learned":
        positions = embeddings.position_embeddings.numpy()[:sequence_length]
    else:
        positions = np.asarray(sinusoidal_positions(sequence_length, embeddings.hidden_dim))
    token_table = weights.constant(embeddings.token_embedding.embeddings)
    segment_table = weights.constant(embeddings.segment_embedding.embeddings)
    positions = tf.constant(positions[None], tf.float32)  # [1, S, H]
    embedding_norm = weights.layer_norm(embeddings.layer_norm)
    blocks = [_Block(layer, weights) for layer in backbone.transformer_layers]
    pooler = weights.dense(backbone.pooler.dense) if model.pooling == "pooled" else None
    head = weights.dense(model.output_dense)
    mask_table = tf.constant([INTEGER_MASK_VALUE, 0.0], tf.float32)
    output_name = "logits" if model.activation is None and not probabilities else "probabilities"
    # Probabilities of our own only over logits, as the Keras model's readable outputs are: a
    # sigmoid per label for a multi-label head, else a softmax over the classes.
    squash = None
    if model.activation is None and probabilities:
        squash = tf.math.sigmoid if model.multi_label else (lambda scores: tf.nn.softmax(scores, axis=-1))

    def forward(ids, mask, segment_ids):  # int32 [1, S] each
        x = tf.gather(token_table, ids) + tf.gather(segment_table, segment_ids) + positions  # [1, S, H]
        x = tf.reshape(embedding_norm(x), (sequence_length, -1))  # [S, H]
        bias = tf.reshape(tf.gather(mask_table, mask), (1, 1, 1, sequence_length))  # [1, 1, 1, S]
        for block in blocks:
            x = block(x, bias)
        if pooler is None:
            shares = tf.nn.softmax(tf.reshape(bias, (1, sequence_length)), axis=-1)  # [1, S]: 1/count or ~0
            pooled = tf.matmul(shares, x)  # [1, H]
        else:
            pooled = pooler(x[:1])  # [1, H]: [CLS]
        scores = head(pooled)  # [1, C]
        return {output_name: scores if squash is None else squash(scores)}

    function = tf.function(
        named_endpoint(forward, EXPORT_ID_INPUTS),
        input_signature=id_signature(EXPORT_ID_INPUTS, batch=1, length=sequence_length),
        autograph=False,
    )
    return function


class _Weights:
    """The model's variables as float32 constants, wrapped into the forward's pieces."""

    @staticmethod
    def constant(variable):
        return tf.constant(np.asarray(variable.numpy(), np.float32))

    def layer_norm(self, layer):
        gamma, beta, epsilon = self.constant(layer.gamma), self.constant(layer.beta), float(layer.epsilon)

        def normalize(x):  # [..., H]
            centred = x - tf.reduce_mean(x, axis=-1, keepdims=True)
            variance = tf.reduce_mean(centred * centred, axis=-1, keepdims=True)
            return centred * tf.math.rsqrt(variance + epsilon) * gamma + beta

        return normalize

    def dense(self, layer):
        kernel, bias = self.constant(layer.kernel), self.constant(layer.bias)
        activation = layer.activation

        def apply(x):  # [M, in] -> [M, out]
            return activation(tf.matmul(x, kernel) + bias)

        return apply


class _Block:
    """One post-LN TransformerEncoder on [S, H] tokens of one sequence."""

    def __init__(self, layer, weights):
        attention = layer.attention
        self.heads, self.head_dim = attention.num_heads, attention.head_dim
        self.scale = 1.0 / float(np.sqrt(self.head_dim))
        self.query, self.key, self.value = (
            weights.dense(attention.query_dense), weights.dense(attention.key_dense), weights.dense(attention.value_dense)
        )
        self.attention_output = weights.dense(attention.output_dense)
        self.attention_norm = weights.layer_norm(layer.attention_layer_norm)
        self.intermediate = weights.dense(layer.feed_forward.intermediate_dense)  # with its GELU
        self.output = weights.dense(layer.feed_forward.output_dense)
        self.output_norm = weights.layer_norm(layer.output_layer_norm)

    def __call__(self, x, bias):  # x [S, H], bias [1, 1, 1, S]
        length = x.shape[0]

        def heads(y):  # [S, H] -> [1, N, S, D]
            return tf.transpose(tf.reshape(y, (1, length, self.heads, self.head_dim)), (0, 2, 1, 3))

        q, k, v = heads(self.query(x) * self.scale), heads(self.key(x)), heads(self.value(x))
        scores = tf.matmul(q, k, transpose_b=True) + bias  # [1, N, S, S]
        context = tf.matmul(tf.nn.softmax(scores, axis=-1), v)  # [1, N, S, D]
        context = tf.reshape(tf.transpose(context, (0, 2, 1, 3)), (length, -1))  # [S, H]
        x = self.attention_norm(x + self.attention_output(context))
        return self.output_norm(x + self.output(self.intermediate(x)))  # through [S, I]


def convert_integer_only(model, sequence_length, calibration_inputs, quantization="int8_only"):
    """The integer-only .tflite bytes of the classifier `model` at the static shape
    [1, sequence_length]: `integer_forward` converted through the one conversion home with
    integer kernels only; int32 `ids`, `mask`, `segment_ids` in, float32 logits (or
    probabilities) out of the one DEQUANTIZE at the end.

    Args:
        model: a built `BertClassifier` (see `integer_forward`).
        sequence_length: int. The static length S.
        calibration_inputs: a list of dicts {ids, mask, segment_ids} of int32 arrays
            [1, S]: real examples of the task, on which the activation ranges are measured
            (a few hundred sentences).
        quantization: "int8_only" (TFLite's 8x8: int8 activations and weights) or
            "int16x8_only" (16x8: int16 activations, int8 weights).

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100)
    >>> model = kb.BertClassifier(backbone, num_classes=2)
    >>> ids = np.array([[2, 7, 3, 0]], "int32")
    >>> example = {"ids": ids, "mask": (ids > 0).astype("int32"), "segment_ids": np.zeros_like(ids)}
    >>> flatbuffer = convert_integer_only(model, 4, [example])
    >>> len(flatbuffer) < 0.3 * sum(w.size * 4 for w in model.get_weights())
    True
    """
    check_choice("quantization", quantization, INTEGER_ONLY_QUANTIZATIONS)
    return convert_static(model, sequence_length, quantization, calibration_inputs)


def convert_static(model, sequence_length, quantization, calibration_inputs=None, probabilities=False):
    """The .tflite bytes of `integer_forward` at [1, sequence_length] in one of
    STATIC_QUANTIZATIONS: the integer-only ones (see `convert_integer_only`) or "float16_gpu",
    float16 weights and float activations for the GPU delegate. The GPU delegate plans its
    kernels when it is built, so it wants a static `shape_signature` and no SHAPE or PACK op:
    this forward has neither, where the Keras graph traced at a free [B, T] has both.

    Args:
        model: a built `BertClassifier` (see `integer_forward`).
        sequence_length: int. The static length S.
        quantization: one of STATIC_QUANTIZATIONS.
        calibration_inputs: for the integer-only ones, as for `convert_integer_only`; unused
            by "float16_gpu".
        probabilities: bool. As for `integer_forward` (the MediaPipe file).

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100)
    >>> model = kb.BertClassifier(backbone, num_classes=2)
    >>> flatbuffer = convert_static(model, 4, "float16_gpu")
    >>> from keras_bert_impl.conversion.tflite_targets import TfliteTargets
    >>> TfliteTargets(flatbuffer).runs_on()
    ['CPU', 'GPU (shapes)']
    """
    from keras_bert_impl.conversion.tflite_converter import convert_endpoint

    check_choice("quantization", quantization, STATIC_QUANTIZATIONS)
    function = integer_forward(model, sequence_length, probabilities=probabilities)
    if quantization == "float16_gpu":
        return convert_endpoint(function.python_function, function.input_signature, "float16")
    return convert_endpoint(
        function.python_function, function.input_signature, quantization, calibration_inputs=calibration_inputs
    )
