"""The forms `TextPredictor` runs a classifier's fp32 forward in on TensorFlow: the integer forms'
`classifier_forward` (integer_forms.py) with a LayerNorm that TensorFlow's oneDNN build runs as
one kernel.

Why not the Keras model's own graph: Keras 3 lowers LayerNormalization to moments and a
scale-and-offset (Mean, SquaredDifference, Mean, Rsqrt, three Mul, Neg, AddV2s), which grappler's
remapper leaves as they are: about 13 ms of a 100 ms [32, 32] forward of the cpu_peers MiniLM on
an AVX-512 Xeon (bench/results/forward_gap_xeon.json). The remapper turns a LayerNorm into its
`_MklLayerNorm` (one pass per token) only where it finds the form tf.keras 2 wrote, a
FusedBatchNormV3 in training mode over the tokens reshaped to [1, tokens, H, 1] in NCHW (one
"channel" per token, its H values normalized), then gamma and beta (`FindMklLayerNorm`,
grappler/optimizers/remapper.cc); it matches neither Keras 3's form nor the textbook one
(checked on the optimized graphs). On the same forward the forms also fuse every bias and the
exact GELU into the matmuls (`integer_forms._dense` adds biases as BiasAdd) and keep no per-call
concatenation of the Q/K/V kernels.

The speed against the Keras graph: bench/results/forward_gap_xeon.json.

Without oneDNN (TF_ENABLE_ONEDNN_OPTS=0, or a CPU TensorFlow runs Eigen on) the remapper does
not fuse it, and Eigen's NCHW FusedBatchNorm is slower than the plain form: there `norm` is
`LiteRtForms`' textbook one.

The padding mask adds the Keras model's MASK_VALUE (-1e9), not the integer forms' -30: this
forward stands in for the model itself at fp32.
"""

import tensorflow as tf

from keras_bert_impl.inference.litert_forms import LiteRtForms
from keras_bert_impl.layers.masking import MASK_VALUE


def onednn_enabled():
    """Whether this process's TensorFlow runs its oneDNN kernels (keras_bert_impl turns them on
    for every x86 CPU; TF_ENABLE_ONEDNN_OPTS overrides)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


class OneDnnForms(LiteRtForms):
    """`classifier_forward`'s hooks for TensorFlow's fp32 forward: LayerNorm in the form oneDNN's
    remapper fuses into `_MklLayerNorm` where oneDNN is on, the textbook one elsewhere.

    Example (its LayerNorm, fused where oneDNN is on; the whole forward is `IntegerForms`' example
    with `OneDnnForms()`):
    >>> forms = OneDnnForms()
    >>> forms.fused_norm == onednn_enabled()
    True
    >>> layer = keras.layers.LayerNormalization(epsilon=1e-12)
    >>> x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
    >>> keras_norm = layer(x)  # builds its scale and offset
    >>> bool(np.allclose(forms.norm("norm", layer, x), keras_norm, atol=1e-5))
    True
    """

    mask_value = MASK_VALUE

    def __init__(self):
        self.fused_norm = onednn_enabled()

    def norm(self, name, layer, x):  # x [..., H] -> [..., H]
        if not self.fused_norm:
            return super().norm(name, layer, x)
        shape = tf.shape(x)
        tokens = tf.reduce_prod(shape[:-1])
        channels = tf.reshape(x, tf.stack([1, tokens, x.shape[-1], 1]))  # [1, tokens, H, 1]: NCHW
        ones, zeros = tf.fill(tf.stack([tokens]), 1.0), tf.fill(tf.stack([tokens]), 0.0)
        empty = tf.constant([], tf.float32)  # no running statistics: training mode's batch moments
        normalized = tf.raw_ops.FusedBatchNormV3(
            x=channels,
            scale=ones,
            offset=zeros,
            mean=empty,
            variance=empty,
            epsilon=float(layer.epsilon),
            data_format="NCHW",
            is_training=True,
        )[0]
        return tf.reshape(normalized, shape) * layer.gamma + layer.beta
