"""Activation lookup shared by the feed-forward and MLM-head layers.

BERT checkpoints disagree on what "gelu" means: Google's original
`modeling.py` and tf-models-official's default use the tanh approximation,
Hugging Face's "gelu" is the exact erf form. We keep both under explicit names
so an importer can say which one its source used.

Both forms go through `keras.ops.gelu` (`tf.nn.gelu` on TensorFlow), which
the TFLite converter of TF 2.20 lowers to its builtin GELU op, exact and tanh
alike (tests/export/test_tflite_builtins.py guards this). TFLite has no
builtin ERF kernel (a bare tf.math.erf fails builtin-only conversion with
"'tf.Erf' op is neither a custom op nor a flex op"), so the GELU fusion is what keeps the exact
form convertible with builtins only; we therefore never write the formula out
in a shape the converter might not recognise.
"""

import keras

ACTIVATIONS = ("gelu", "gelu_approximate", "relu", "tanh", "linear")


def _gelu_exact(x):
    return keras.ops.gelu(x, approximate=False)


def _gelu_tanh(x):
    return keras.ops.gelu(x, approximate=True)


_FUNCTIONS = {
    "gelu": _gelu_exact,
    "gelu_approximate": _gelu_tanh,
    "relu": keras.ops.relu,
    "tanh": keras.ops.tanh,
    "linear": lambda x: x,
}


def get_activation(name):
    """Returns the activation function for `name` (one of `ACTIVATIONS`)."""
    if name not in _FUNCTIONS:
        raise ValueError(
            f"Unknown activation {name!r}. Use one of {list(ACTIVATIONS)}: "
            "'gelu' is the exact erf form (BERT paper, Hugging Face), "
            "'gelu_approximate' the tanh form (Google's modeling.py)."
        )
    return _FUNCTIONS[name]
