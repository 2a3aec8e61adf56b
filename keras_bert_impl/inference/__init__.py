"""Fast inference on raw text: length-bucketed batches of a fine-tuned model, in fp32, bf16 or int8."""

from keras_bert_impl.backend_support import require_tensorflow

# The check runs before the imports below (they import TensorFlow), hence their E402 waivers.
require_tensorflow(
    "keras_bert_impl.inference (TextPredictor: the in-graph tokenizer, tf.function and TFLite int8)",
    "On another backend call model.predict on token ids made in a TensorFlow process.",
)

from keras_bert_impl.inference.int8_forward import Int8Forward  # noqa: E402
from keras_bert_impl.inference.precision import with_precision  # noqa: E402
from keras_bert_impl.inference.text_predictor import TextPredictor  # noqa: E402
from keras_bert_impl.precisions import PRECISIONS  # noqa: E402

__all__ = ["PRECISIONS", "Int8Forward", "TextPredictor", "with_precision"]
