"""Fast inference on raw text: length-bucketed batches of a fine-tuned model, in fp32, bf16 or int8."""

from keras_bert_impl.backend_support import require_tensorflow

# The check runs before the imports below (they import TensorFlow), hence their E402 waivers.
require_tensorflow(
    "keras_bert_impl.inference (TextPredictor: the in-graph tokenizer, tf.function and TFLite int8)",
    "On another backend call model.predict on token ids made in a TensorFlow process.",
)

from keras_bert_impl.inference.litert_forward import LiteRtForward  # noqa: E402
from keras_bert_impl.inference.precision import with_precision  # noqa: E402
from keras_bert_impl.inference.text_predictor import TextPredictor  # noqa: E402
from keras_bert_impl.precisions import PRECISIONS  # noqa: E402

__all__ = ["PRECISIONS", "LiteRtForward", "TextPredictor", "with_precision"]


def __getattr__(name):
    # LiteRtForward's name while it ran int8 only; it runs float32 too (quantization="float32").
    if name == "Int8Forward":
        import warnings

        warnings.warn(
            "keras_bert_impl.inference.Int8Forward is now LiteRtForward (the same class: it runs "
            "quantization='dynamic_int8' or 'float32'); the old name will be removed.",
            DeprecationWarning,
            stacklevel=2,
        )
        return LiteRtForward
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
