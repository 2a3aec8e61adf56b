"""The export wing of keras_bert_impl: a trained `.keras` model into the artifacts that run it
elsewhere (SavedModels for TF Serving, TFLite files for LiteRT and MediaPipe Tasks), each
checked in the runtime that serves it, with a report.

Its `serve` sub-package loads what the exporting modules wrote for `kbert serve`, whose server
is `keras_bert_lite.serve.model_server.ModelServer`.
It depends on the library's public API and the library never imports it, except the `kbert
export` and `kbert serve` commands, which load it lazily (tests/test_architecture.py holds
both rules).
Installed from `export/keras_bert_impl_export/` as the `keras_bert_impl_export` package.
"""

# The library first: its __init__ sets TensorFlow's C++ log level before TensorFlow loads.
import keras_bert_impl  # noqa: F401,E402
from keras_bert_impl.backend_support import require_tensorflow  # noqa: E402

require_tensorflow(
    "The export wing (SavedModel, TFLite, kbert serve)",
    "Save the model as .keras on this backend (model.save), then export it from a TensorFlow process: "
    "a .keras file loads on every backend.",
)
