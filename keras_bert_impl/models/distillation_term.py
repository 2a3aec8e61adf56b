"""One weighted term of the `Distiller`'s loss, with what belongs to it: its projection,
its loss tracker and its config.

Shape legend: B batch, T tokens, C classes, H width (Hs student, Ht teacher), K mapped
layers, N heads.
"""

import keras
from keras import ops

from keras_bert_impl.models.distillation_argument_error import DistillationArgumentError
from keras_bert_impl.models.distillation_loss import DistillationLoss
from keras_bert_impl.models.transfer_terms import masked_attention_kl, masked_mse, projection


class DistillationTerm:
    """A term of the distillation loss: "logits" (Hinton's KD), "hidden" (TinyBERT's MSE of
    the mapped layers' hidden states), "attention" (the per-head KL of their attention
    probabilities) or "embedding" (the MSE of the embedding outputs).

    The term owns its projection (TinyBERT's W, `Dense(Ht, use_bias=False)`, for "hidden"
    and "embedding" when the widths differ), its loss tracker (`<kind>_loss` in `fit`'s
    logs; none for "logits", whose value is the loss itself) and its config, the
    `Distiller` arguments it stands for. It is a plain object: the `Distiller` tracks the
    projection and the tracker under its own attributes, so they are trained and saved
    with it.

    Args:
        kind: "logits", "hidden", "attention" or "embedding".
        weight: float > 0, its weight in the loss ("logits": 1 - alpha).
        student_width, teacher_width: the backbones' widths ("hidden", "embedding").
        temperature, alpha, multi_label: the "logits" term's settings.

    Example:
    >>> term = DistillationTerm("hidden", 0.5, student_width=8, teacher_width=16)
    >>> term.name, term.projection.name, term.get_config()
    ('hidden_loss', 'hidden_projection', {'hidden_weight': 0.5})
    """

    KINDS = ("logits", "hidden", "attention", "embedding")

    def __init__(
        self,
        kind,
        weight,
        student_width=None,
        teacher_width=None,
        temperature=None,
        alpha=None,
        multi_label=False,
    ):
        if kind not in self.KINDS:
            raise ValueError(f"kind must be one of {self.KINDS}. Received: kind={kind!r}")
        self.kind = kind
        self.weight = float(weight)
        self.name = f"{kind}_loss"
        self.projection = None
        self.tracker = None
        if kind == "logits":
            try:
                self.loss = DistillationLoss(temperature, multi_label=multi_label)
            except ValueError as e:
                raise DistillationArgumentError("temperature", str(e)) from None
            self.temperature, self.alpha = float(temperature), float(alpha)
            return
        if kind != "attention" and student_width != teacher_width:
            self.projection = projection(f"{kind}_projection", student_width, teacher_width)
        self.tracker = keras.metrics.Mean(name=self.name)

    @property
    def feature(self):
        """The feature-dict entry the term reads (`Distiller`'s feature models)."""
        return {
            "logits": "logits",
            "hidden": "hidden_states",
            "attention": "attention_probs",
            "embedding": "embedding_output",
        }[self.kind]

    def __call__(self, student, teacher, mask, tokens, sample_weight=None):
        """The unweighted term from the student's and the teacher's tensors: logits [B, C] or
        [B, T, C] (`sample_weight` per row or token), states [B, K, T, H] or [B, T, H],
        attention [B, K, N, T, T]; `mask` [B, T] float, `tokens` the global batch's real
        token count (transfer_terms.transfer_terms' rule)."""
        if self.kind == "logits":
            return self.loss(teacher, student, sample_weight=sample_weight)
        if self.kind == "attention":
            return masked_attention_kl(teacher, student, mask, tokens)
        if self.projection is not None:
            student = self.projection(student)  # [.., Hs] -> [.., Ht]
        if self.kind == "embedding":
            student, teacher = ops.expand_dims(student, 1), ops.expand_dims(teacher, 1)  # one "layer"
        return masked_mse(student, teacher, mask, tokens)

    def get_config(self):
        """The `Distiller` arguments this term stands for."""
        if self.kind == "logits":
            return {"temperature": self.temperature, "alpha": self.alpha}
        return {f"{self.kind}_weight": self.weight}
