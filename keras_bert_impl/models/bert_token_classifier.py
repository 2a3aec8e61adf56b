"""Token tagging (NER, part of speech) on every position of `sequence_output`."""

import keras

from keras_bert_impl.models.bert_task import BertTask
from keras_bert_impl.models.masked_sparse_crossentropy import MaskedSparseCrossentropy
from keras_bert_impl.validation import check_label_names, check_positive_int, check_probability


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertTokenClassifier(BertTask):
    """Tagging head: dropout + Dense(num_classes) per token; outputs `logits` [B, T, C].

    Train with `sample_weight=padding_mask` (or a first-wordpiece mask) so padding
    and continuation pieces do not count.

    Args:
        backbone: a `BertBackbone`.
        num_classes: int. Number of tags.
        dropout: float.
        label_names: list of str or None. The tag names in id order, kept in the config.

    Example:
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> x = BertPreprocessor("data/minilm/vocab.txt", sequence_length=8)(["Pierre Vinken joined the board"])
    >>> tagger = BertTokenClassifier(kb.BertBackbone.from_preset("bert_tiny"), num_classes=9)
    >>> tagger(x)["logits"].shape
    TensorShape([1, 8, 9])
    """

    _task_config_keys = ("num_classes", "dropout", "label_names")

    def __init__(self, backbone, num_classes, dropout=0.1, label_names=None, **kwargs):
        self._check_backbone(backbone)
        check_positive_int("num_classes", num_classes)
        label_names = check_label_names(label_names, num_classes)
        check_probability("dropout", dropout)
        self._output_layers(backbone, num_classes, dropout)
        inputs = backbone.input
        sequence = backbone(inputs)["sequence_output"]  # [B, T, H]
        logits = self.output_dense(self.output_dropout(sequence))  # [B, T, C]
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)
        self.num_classes = num_classes
        self.dropout = dropout
        self.label_names = label_names
        self.compile()

    def default_loss(self):
        # The mean over the labelled wordpieces (sample weight 1), as Model Garden's tagging
        # task, not over every position.
        return MaskedSparseCrossentropy()

    def default_weighted_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
