"""Pretraining data: documents -> sentence pairs -> masked examples -> TFRecords -> tf.data; the
distillation transfer set (`transfer_dataset`)."""

from keras_bert_impl.backend_support import TOKENIZE_ELSEWHERE, require_tensorflow

# Pretraining data and the task readers are tf.data pipelines around the in-graph tokenizer.
require_tensorflow("keras_bert_impl.data (the task readers and pretraining data: tf.data pipelines)", TOKENIZE_ELSEWHERE)

from keras_bert_impl.data.corpus_split import CorpusSplit
from keras_bert_impl.data.pretraining_corpus import PretrainingCorpus, documents_to_text, split_sentences
from keras_bert_impl.data.pretraining_example_builder import PretrainingExampleBuilder
from keras_bert_impl.data.pretraining_features import (
    IS_NEXT,
    NOT_NEXT,
    NSP_FEATURE,
    feature_spec,
    tensor_signature,
    to_pretrainer_inputs,
)
from keras_bert_impl.data.pretraining_instance import PretrainingInstance
from keras_bert_impl.data.pretraining_masker import PretrainingMasker
from keras_bert_impl.data.pretraining_record_reader import PretrainingRecordReader
from keras_bert_impl.data.pretraining_record_writer import PretrainingRecordWriter
from keras_bert_impl.data.stratified_split import stratified_split
from keras_bert_impl.data.transfer_dataset import transfer_dataset
from keras_bert_impl.data.unigram_baseline import unigram_baseline
