"""Task metrics: classification, multi-label, tagging (entities) and SQuAD v1.1, and `compute_metrics`
(a task model's metrics on a dataset) that evaluate, finetune and distill share.

Plain numpy/python (no TensorFlow); every function returns plain python
numbers in dicts, so the results can be dumped as JSON.
"""

from keras_bert_impl.evaluation.classification_metrics import classification_metrics
from keras_bert_impl.evaluation.multilabel_metrics import multilabel_metrics
from keras_bert_impl.evaluation.squad_decoding import (
    best_squad_spans,
    decode_squad_predictions,
    squad_gold_answers,
)
from keras_bert_impl.evaluation.squad_metrics import normalize_answer, squad_metrics
from keras_bert_impl.evaluation.tagging_metrics import extract_entities, tagging_metrics
from keras_bert_impl.evaluation.task_metrics import compute_metrics, sequence_metrics
from keras_bert_impl.evaluation.word_tags import tags_from_wordpieces

__all__ = [
    "best_squad_spans",
    "classification_metrics",
    "compute_metrics",
    "decode_squad_predictions",
    "extract_entities",
    "multilabel_metrics",
    "normalize_answer",
    "sequence_metrics",
    "squad_gold_answers",
    "squad_metrics",
    "tagging_metrics",
    "tags_from_wordpieces",
]
