"""The forms `LiteRtForward` converts a classifier in: `integer_forms.classifier_forward` with a
plain LayerNorm, for a float graph on XNNPACK (float32, or dynamic-range int8 whose float
activations are quantized per batch inside each fully connected layer).

Why not the Keras model's own graph: TensorFlow lowers our layers to a TFLite graph that costs
XNNPACK time outside the matmuls (issue 33, `perf` samples of LiteRT on the cpu_peers classifier,
[32, 32] batches, on an AVX-512 VNNI Xeon):
- the merged Q/K/V projection is split by an UNPACK, which XNNPACK does not take: it runs in
  TFLite's own kernels (a copy of Q, K and V, 3.5% of the int8 forward) and cuts the delegated
  graph at every layer; the forms project Q, K and V with three FULLY_CONNECTED ops and put the
  keys straight into [B, N, D, S];
- Keras' LayerNormalization lowers to TensorFlow's moments and a scale-and-offset: beside its
  two MEANs, six full-size elementwise ops (SQUARED_DIFFERENCE, a MUL that broadcasts gamma
  times 1/std to the whole [B*S, H], two more MULs, two ADDs); here five: centre, square,
  scale by 1/std, gamma, beta.
The speed against the Keras graph, in int8 and float32: bench/results/litert_profile.json.

The integer-only file's forms rescale each token before its variance (`integer_forms._norm`:
int8 needs it); in a float graph that is three full-size passes more and changes nothing, so `norm`
here is the textbook one. The padding mask is the integer forms' table lookup (-30 at padding:
exp(-30) is 9e-14 of a real key, so the float forward stays within 1e-5 of Keras).
"""

from keras import ops

from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.integer_forms import IntegerForms
from keras_bert_impl.models.quantized_layers import quantization_modes


def computes_in_forms(model):
    """Whether `classifier_forward` computes `model`'s own function, as `LiteRtForward` and
    `TextPredictor`'s fp32 run it: a `BertClassifier` of float weights computing in float32. Not
    one Keras' `model.quantize` left int8 kernels in (only its own layers apply their scales),
    nor one under a mixed policy (its layers compute in bf16 or fp16; the forms in float32):
    those run their Keras graph."""
    return (
        isinstance(model, BertClassifier)
        and not quantization_modes(model)
        and model.compute_dtype == model.backbone.compute_dtype == "float32"
    )


class LiteRtForms(IntegerForms):
    """`classifier_forward`'s hooks for a float TFLite graph: the base's plain float forward
    with LayerNorm as MEAN, SUB, MUL, MEAN, RSQRT and a scale and offset.

    Example (its LayerNorm; the whole forward is `IntegerForms`' example with `LiteRtForms()`):
    >>> layer = keras.layers.LayerNormalization(epsilon=1e-12)
    >>> x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
    >>> keras_norm = layer(x)  # builds its scale and offset
    >>> bool(np.allclose(LiteRtForms().norm("norm", layer, x), keras_norm, atol=1e-5))
    True
    """

    def norm(self, name, layer, x):  # x [..., H] -> [..., H]
        centred = x - ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(centred * centred, axis=-1, keepdims=True)  # [..., 1]
        return centred * ops.rsqrt(variance + layer.epsilon) * layer.gamma + layer.beta
