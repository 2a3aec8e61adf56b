"""Fast inference on raw text: length-bucketed batches of a fine-tuned model."""

from keras_bert_impl.inference.precision import PRECISIONS, with_precision
from keras_bert_impl.inference.text_predictor import TextPredictor

__all__ = ["PRECISIONS", "TextPredictor", "with_precision"]
