"""Fast inference on raw text: length-bucketed batches of a fine-tuned model."""

from keras_bert_impl.inference.text_predictor import TextPredictor

__all__ = ["TextPredictor"]
