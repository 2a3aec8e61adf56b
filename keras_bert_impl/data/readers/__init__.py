"""Task file readers: classification CSV/TSV/JSONL, SQuAD JSON, tagged text -> tf.data for the BERT heads."""

from keras_bert_impl.data.readers.classification_reader import ClassificationReader
from keras_bert_impl.data.readers.label_vocabulary import LabelVocabulary
from keras_bert_impl.data.readers.malformed_row_error import MalformedRowError
from keras_bert_impl.data.readers.read_report import ReadReport
from keras_bert_impl.data.readers.squad_feature import SquadFeature
from keras_bert_impl.data.readers.squad_reader import SquadReader
from keras_bert_impl.data.readers.tagging_reader import TaggingReader

__all__ = [
    "ClassificationReader",
    "LabelVocabulary",
    "MalformedRowError",
    "ReadReport",
    "SquadFeature",
    "SquadReader",
    "TaggingReader",
]
