"""Sentence and sentence-pair classification on the pooled [CLS] output or the token mean."""

import keras

from keras_bert_impl.layers.masking import masked_mean
from keras_bert_impl.models.bert_task import BertTask
from keras_bert_impl.models.global_batch_loss import GlobalBatchLoss
from keras_bert_impl.validation import check_choice, check_label_names, check_positive_int, check_probability


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertClassifier(BertTask):
    """Classifier head: dropout + Dense(num_classes) on `pooled_output` (or the token mean).

    One sentence uses segment 0 throughout; a pair packs `[CLS] A [SEP] B [SEP]`
    with segment ids 0 for A and 1 for B. Multi-label tasks (`multi_label=True`)
    use one independent sigmoid per class.

    Args:
        backbone: a `BertBackbone`.
        num_classes: int.
        multi_label: bool. Compile with binary cross-entropy per class instead of softmax cross-entropy.
        activation: None (output `logits`), "softmax" or "sigmoid" (output `probabilities`).
        dropout: float. Dropout before the output layer.
        pooling: "pooled" (BERT's: the tanh pooler on [CLS], trained by NSP) or "mean"
            (the mean of `sequence_output` over unpadded tokens: the pooling
            sentence-transformers checkpoints such as all-MiniLM-L6-v2 were trained
            with, whose pooler never was).
        label_names: list of str or None. The class names in id order, kept in the
            config so a saved model can print names (`kbert predict`) and exports
            can carry them.

    Example:
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> preprocessor = BertPreprocessor("data/minilm/vocab.txt", sequence_length=16)
    >>> x = preprocessor(["a gripping, funny film", "a dull mess"])
    >>> # Compiled already:
    >>> classifier = BertClassifier(kb.BertBackbone.from_preset("bert_tiny"), num_classes=2)
    >>> history = classifier.fit(x, np.array([1, 0]), epochs=1, verbose=0)
    >>> classifier.predict(x, verbose=0)["logits"].shape
    (2, 2)
    """

    _task_config_keys = ("num_classes", "multi_label", "activation", "dropout", "label_names", "pooling")

    def __init__(
        self,
        backbone,
        num_classes,
        multi_label=False,
        activation=None,
        dropout=0.1,
        label_names=None,
        pooling="pooled",
        **kwargs,
    ):
        self._check_backbone(backbone)
        check_positive_int("num_classes", num_classes)
        check_choice("pooling", pooling, ("pooled", "mean"))
        label_names = check_label_names(label_names, num_classes)
        check_choice("activation", activation, (None, "softmax", "sigmoid"))
        check_probability("dropout", dropout)
        self._output_layers(backbone, num_classes, dropout, activation)
        inputs = backbone.input
        outputs = backbone(inputs)
        if pooling == "pooled":
            pooled = outputs["pooled_output"]  # [B, H]
        else:
            pooled = masked_mean(outputs["sequence_output"], inputs["padding_mask"])  # [B, H]
        output = self.output_dense(self.output_dropout(pooled))  # [B, C]
        key = "logits" if activation is None else "probabilities"
        super().__init__(inputs=inputs, outputs={key: output}, **kwargs)
        self.num_classes = num_classes
        self.multi_label = multi_label
        self.activation = activation
        self.dropout = dropout
        self.label_names = label_names
        self.pooling = pooling
        self.compile()

    def default_loss(self):
        from_logits = self.activation is None
        # GlobalBatchLoss: a partial last batch split unevenly over replicas trains as on one device.
        if self.multi_label:
            return GlobalBatchLoss(keras.losses.BinaryCrossentropy(from_logits=from_logits))
        return GlobalBatchLoss(keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits))

    def default_metrics(self):
        if self.multi_label:
            # Per-label accuracy at probability 0.5 (logit 0).
            return [
                keras.metrics.BinaryAccuracy(
                    name="accuracy", threshold=0.0 if self.activation is None else 0.5
                )
            ]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
