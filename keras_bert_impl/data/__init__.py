"""Pretraining data: documents -> sentence pairs -> masked examples -> TFRecords -> tf.data."""

from keras_bert_impl.data.pretraining_corpus import PretrainingCorpus
from keras_bert_impl.data.pretraining_example_builder import PretrainingExampleBuilder, PretrainingInstance
from keras_bert_impl.data.pretraining_features import to_pretrainer_inputs
from keras_bert_impl.data.pretraining_masker import PretrainingMasker
from keras_bert_impl.data.pretraining_record_reader import PretrainingRecordReader
from keras_bert_impl.data.pretraining_record_writer import PretrainingRecordWriter
