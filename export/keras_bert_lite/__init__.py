"""keras_bert_lite: a `kbert export` folder's classifier on raw text with LiteRT, without TensorFlow
or Keras: BertPreprocessor's WordPiece ids in plain Python (`WordPieceTokenizer`), the exported
.tflite on XNNPACK (`LiteTextClassifier`). Imports numpy and ai_edge_litert only."""

from keras_bert_lite.char_table import CharTable
from keras_bert_lite.lite_text_classifier import LiteTextClassifier
from keras_bert_lite.wordpiece_tokenizer import WordPieceTokenizer

__all__ = ["CharTable", "LiteTextClassifier", "WordPieceTokenizer"]
