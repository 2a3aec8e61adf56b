"""BERT pretraining: masked LM (tied to the token embedding) + next-sentence prediction.

Shape legend: B batch, T sequence length, P masked positions, V vocabulary.
"""

import keras

from keras_bert_impl.layers.activations import ACTIVATIONS
from keras_bert_impl.layers.masked_lm_head import MaskedLMHead
from keras_bert_impl.layers.next_sentence_head import NextSentenceHead
from keras_bert_impl.models.bert_backbone import _concrete
from keras_bert_impl.models.bert_task import BertTask
from keras_bert_impl.models.global_batch_loss import GlobalBatchLoss
from keras_bert_impl.models.masked_lm_accuracy import MaskedLMAccuracy
from keras_bert_impl.models.masked_sparse_crossentropy import MaskedSparseCrossentropy
from keras_bert_impl.validation import check_choice


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertPretrainer(BertTask):
    """MLM + NSP heads on a backbone.

    Inputs: the backbone's three plus `mask_positions` int [B, P]. Outputs:
    `mlm_logits` [B, P, V] and `nsp_logits` [B, 2] (0 = IsNext, 1 = NotNext).
    Train with `y={"mlm_logits": masked_ids, "nsp_logits": nsp_labels}` and
    `sample_weight={"mlm_logits": mask_weights, "nsp_logits": ones}` (Google's
    `masked_lm_weights`; Keras wants a weight for every output once one has
    one), so the MLM loss is the mean over the real masked positions, not over every slot
    of P (`MaskedSparseCrossentropy`, Google's masked-LM loss).

    Args:
        backbone: a `BertBackbone`.
        activation: MLM transform activation; defaults to the backbone's.

    Example:
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> x = BertPreprocessor("data/minilm/vocab.txt", sequence_length=8)(["the quick brown fox"])
    >>> x["mask_positions"] = keras.ops.array([[2, 3]], "int32")  # predict the tokens at positions 2 and 3
    >>> pretrainer = BertPretrainer(kb.BertBackbone.from_preset("bert_tiny"))
    >>> outputs = pretrainer(x)
    >>> outputs["mlm_logits"].shape, outputs["nsp_logits"].shape
    (TensorShape([1, 2, 30522]), TensorShape([1, 2]))
    """

    _task_config_keys = ("activation",)
    default_learning_rate = 1e-4

    def __init__(self, backbone, activation=None, **kwargs):
        self._check_backbone(backbone)
        activation = backbone.activation if activation is None else activation
        check_choice("activation", activation, ACTIVATIONS)
        self.backbone = backbone
        self.masked_lm_head = MaskedLMHead(
            backbone.token_embedding,
            activation=activation,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            initializer_range=backbone.initializer_range,
            dtype=backbone.dtype_policy,
            name="masked_lm_head",
        )
        self.next_sentence_head = NextSentenceHead(
            initializer_range=backbone.initializer_range,
            dtype=backbone.dtype_policy,
            name="next_sentence_head",
        )
        inputs = dict(backbone.input)
        inputs["mask_positions"] = keras.Input(shape=(None,), dtype="int32", name="mask_positions")
        outputs = backbone({k: inputs[k] for k in backbone.input})
        mlm_logits = self.masked_lm_head(outputs["sequence_output"], inputs["mask_positions"])
        nsp_logits = self.next_sentence_head(outputs["pooled_output"])
        super().__init__(
            inputs=inputs,
            outputs={
                "mlm_logits": keras.layers.Activation("linear", dtype="float32", name="mlm")(mlm_logits),
                "nsp_logits": keras.layers.Activation("linear", dtype="float32", name="nsp")(nsp_logits),
            },
            **kwargs,
        )
        self.activation = activation
        self.compile()

    def __call__(self, inputs, *args, **kwargs):
        self._check_task_inputs(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def _check_task_inputs(self, x):
        # A position past the sequence is no token: it gave NaN logits on JAX (the gather
        # fills) and finite ones on PyTorch, without an error. Checked where values are concrete.
        if not isinstance(x, dict) or "mask_positions" not in x or "token_ids" not in x:
            return
        length = getattr(x["token_ids"], "shape", (None, None))[1]
        positions = _concrete(x["mask_positions"])
        if not isinstance(length, int) or positions is None or positions.size == 0:
            return
        low, high = int(positions.min()), int(positions.max())
        if low < 0 or high >= length:
            raise ValueError(
                f"Input 'mask_positions' holds the value {high if high >= length else low}, outside [0, "
                f"{length}) (token_ids has {length} positions). Mask positions index each row's tokens: "
                "fill the unused slots with 0 and give them a sample weight of 0."
            )

    def default_loss(self):
        return {
            "mlm_logits": MaskedSparseCrossentropy(),  # the mean over the real masked positions, as Google's
            "nsp_logits": GlobalBatchLoss(
                keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            ),  # every example
        }

    def default_weighted_metrics(self):
        return {
            "mlm_logits": [MaskedLMAccuracy(name="accuracy")],
            "nsp_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        }
