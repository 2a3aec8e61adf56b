"""Which parts of the library run on which Keras backend, in one place.

The model code (layers, models, heads, losses, the distillers, the optimizer and its
schedule) is written in `keras.ops` and runs on every Keras 3 backend: TensorFlow, JAX and
PyTorch (tests/backends/). Some parts are TensorFlow by nature: the in-graph WordPiece
tokenizer (tensorflow-text kernels), the task readers and pretraining data (tf.data),
tf.distribute strategies, SavedModel/TFLite export and the inference paths built on them.
Those call `require_tensorflow` first, so on another backend, or on a machine without
TensorFlow, they stop with one sentence that names the part and what to do instead, not
with a traceback from deep inside TensorFlow or an import of a missing module.

Plain Python: importing this module imports neither TensorFlow nor a backend.
"""

import importlib


class TensorFlowOnlyError(RuntimeError):
    """A TensorFlow-only part of the library was used on another Keras backend, or
    where TensorFlow is not installed."""


def require_tensorflow(what, instead):
    """Returns the `tensorflow` module when Keras runs on the TensorFlow backend and
    TensorFlow imports; else raises `TensorFlowOnlyError` naming `what` (the part, e.g.
    "BertPreprocessor (the in-graph WordPiece tokenizer)") and `instead` (what a user of
    another backend does).
    """
    import keras

    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise TensorFlowOnlyError(
            f"{what} runs on TensorFlow only, and Keras runs on the {backend!r} backend here "
            f"(KERAS_BACKEND={backend}). {instead}"
        )
    try:
        return importlib.import_module("tensorflow")
    except ImportError as error:
        raise TensorFlowOnlyError(
            f"{what} needs TensorFlow, which does not import here ({error}). Install the library with its "
            f"dependencies (pip install keras_bert_impl), or: {instead}"
        ) from None


# What a user of another backend does instead, shared by the parts that refuse.
TOKENIZE_ELSEWHERE = (
    "Tokenize in a TensorFlow process (BertPreprocessor, or the task readers) and pass the token_ids, "
    "segment_ids and padding_mask to the model as numpy arrays."
)
