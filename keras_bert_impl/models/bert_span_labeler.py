"""Extractive question answering: start and end logits over the tokens."""

import keras

from keras_bert_impl.layers.masking import mask_bias
from keras_bert_impl.models.bert_task import BertTask
from keras_bert_impl.models.global_batch_loss import GlobalBatchLoss


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertSpanLabeler(BertTask):
    """SQuAD-style head: Dense(2) per token split into `start_logits` and
    `end_logits` [B, T]; padded positions get a large negative logit so they are
    never predicted.

    Args:
        backbone: a `BertBackbone`.

    Example:
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> pre = BertPreprocessor("data/minilm/vocab.txt", sequence_length=16)
    >>> x = pre((["who saw mary?"], ["mary appeared to bernadette."]))  # 14 tokens, then 2 of padding
    >>> qa = BertSpanLabeler(kb.BertBackbone.from_preset("bert_tiny"))
    >>> outputs = qa(x)
    >>> outputs["start_logits"].shape, keras.ops.convert_to_numpy(outputs["start_logits"])[0, -2:]
    (TensorShape([1, 16]), array([-1.e+09, -1.e+09], dtype=float32))
    """

    def __init__(self, backbone, **kwargs):
        self._check_backbone(backbone)
        self.backbone = backbone
        self.span_dense = keras.layers.Dense(
            2,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=backbone.initializer_range),
            dtype="float32",
            name="span_logits",
        )
        inputs = backbone.input
        logits = self.span_dense(backbone(inputs)["sequence_output"])  # [B, T, 2]
        padding = mask_bias(inputs["padding_mask"])  # [B, T]: 0 on tokens, MASK_VALUE on padding
        start_logits = logits[:, :, 0] + padding
        end_logits = logits[:, :, 1] + padding
        super().__init__(
            inputs=inputs, outputs={"start_logits": start_logits, "end_logits": end_logits}, **kwargs
        )
        self.compile()

    def default_loss(self):
        loss = GlobalBatchLoss(keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return {"start_logits": loss, "end_logits": loss}

    def default_metrics(self):
        return {
            key: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
            for key in ("start_logits", "end_logits")
        }
