"""Pretraining data: documents -> sentence pairs -> masked examples -> TFRecords -> tf.data; the
distillation transfer set (`transfer_dataset`, `TransferSet`)."""

from keras_bert_impl.backend_support import TOKENIZE_ELSEWHERE, require_tensorflow

# Pretraining data and the task readers are tf.data pipelines around the in-graph tokenizer; the
# check runs before the imports below (they import TensorFlow), hence their E402 waivers.
require_tensorflow(
    "keras_bert_impl.data (the task readers and pretraining data: tf.data pipelines)", TOKENIZE_ELSEWHERE
)

from keras_bert_impl.data.corpus_split import CorpusSplit  # noqa: E402
from keras_bert_impl.data.pretraining_corpus import PretrainingCorpus, documents_to_text  # noqa: E402
from keras_bert_impl.data.pretraining_corpus import split_sentences  # noqa: E402
from keras_bert_impl.data.pretraining_example_builder import PretrainingExampleBuilder  # noqa: E402
from keras_bert_impl.data.pretraining_features import (  # noqa: E402
    IS_NEXT,
    NOT_NEXT,
    NSP_FEATURE,
    feature_spec,
    tensor_signature,
    to_pretrainer_inputs,
)
from keras_bert_impl.data.pretraining_instance import PretrainingInstance  # noqa: E402
from keras_bert_impl.data.pretraining_masker import PretrainingMasker  # noqa: E402
from keras_bert_impl.data.pretraining_record_reader import PretrainingRecordReader  # noqa: E402
from keras_bert_impl.data.pretraining_record_writer import PretrainingRecordWriter  # noqa: E402
from keras_bert_impl.data.stratified_split import stratified_split  # noqa: E402
from keras_bert_impl.data.transfer_dataset import transfer_dataset  # noqa: E402
from keras_bert_impl.data.transfer_set import TransferSet  # noqa: E402
from keras_bert_impl.data.unigram_baseline import unigram_baseline  # noqa: E402

__all__ = [
    "IS_NEXT",
    "NOT_NEXT",
    "NSP_FEATURE",
    "CorpusSplit",
    "PretrainingCorpus",
    "PretrainingExampleBuilder",
    "PretrainingInstance",
    "PretrainingMasker",
    "PretrainingRecordReader",
    "PretrainingRecordWriter",
    "TransferSet",
    "documents_to_text",
    "feature_spec",
    "split_sentences",
    "stratified_split",
    "tensor_signature",
    "to_pretrainer_inputs",
    "transfer_dataset",
    "unigram_baseline",
]
