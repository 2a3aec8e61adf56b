"""The head each task trains, and the validation metric that picks its best epoch."""

from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.bert_span_labeler import BertSpanLabeler
from keras_bert_impl.models.bert_token_classifier import BertTokenClassifier
from keras_bert_impl.tasks import SEQUENCE_TASKS, TASKS


def best_monitor(task):
    """(monitor, mode): the validation metric that picks a task's best epoch (best.keras).

    Example:
    >>> best_monitor("multilabel"), best_monitor("tagging")
    (('val_loss', 'min'), ('val_accuracy', 'max'))
    """
    if task in ("multilabel", "squad"):
        return "val_loss", "min"
    return "val_accuracy", "max"


def build_head(task, backbone, num_classes, label_names, dropout, pooling="pooled"):
    """The task's head on `backbone` (uncompiled: its `compile()` brings the head's own loss
    and metrics). `task`: classification, pair, multilabel, tagging or squad.

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100)
    >>> type(build_head("tagging", backbone, 3, ["O", "B", "I"], dropout=0.1)).__name__
    'BertTokenClassifier'
    """
    if task in ("tagging", "squad") or pooling == "mean":
        # These heads read sequence_output only: an untrained pooler is expected, not a bug
        # (Keras would warn each step that it gets no gradients).
        backbone.pooler.trainable = False
    if task in SEQUENCE_TASKS:
        return BertClassifier(
            backbone,
            num_classes=num_classes,
            label_names=label_names,
            multi_label=task == "multilabel",
            dropout=dropout,
            pooling=pooling,
        )
    if task == "tagging":
        return BertTokenClassifier(
            backbone, num_classes=num_classes, label_names=label_names, dropout=dropout
        )
    if task == "squad":
        return BertSpanLabeler(backbone)
    raise ValueError(f"task must be one of {list(TASKS)}. Received: task={task!r}")
