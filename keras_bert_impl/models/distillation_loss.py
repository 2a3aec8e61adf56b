"""Hinton et al.'s soft-target loss: the student matches the teacher's output distribution
softened by a temperature.

Shape legend: B batch, C classes, T tokens.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class DistillationLoss(keras.losses.Loss):
    """KL(teacher || student) of the logits divided by `temperature`, times temperature²
    (so the gradients keep their size as the temperature changes, Hinton et al. 2015).

    Called as `loss(teacher_logits, student_logits, sample_weight=None)`, each [..., C]:
    - multi_label=False: the KL of the two softmax distributions over the last axis;
    - multi_label=True: the KL of each class's two Bernoulli (sigmoid) distributions,
      summed over the classes.
    The per-row values (one per example, or per token for [B, T, C] logits) are averaged; with
    `sample_weight` (e.g. the padding mask [B, T]) the average is over the weight, so padded
    positions count for nothing. Under tf.distribute the value is scaled per replica like any
    Keras loss.

    Args:
        temperature: float > 0. 1 compares the plain distributions; 2-4 is usual.
        multi_label: bool. Sigmoid outputs, one decision per class.

    Example:
    >>> loss = DistillationLoss(temperature=2.0)
    >>> teacher, student = np.array([[2.0, 0.0]]), np.array([[2.0, 0.0]])
    >>> float(loss(teacher, student))
    0.0
    """

    def __init__(self, temperature=2.0, multi_label=False, name="distillation", **kwargs):
        if (
            isinstance(temperature, bool)
            or not isinstance(temperature, (int, float))
            or not 0 < temperature < float("inf")
        ):
            raise ValueError(
                f"temperature must be a finite number > 0. Received: temperature={temperature!r}"
            )
        if not isinstance(multi_label, bool):
            raise ValueError(f"multi_label must be a bool. Received: multi_label={multi_label!r}")
        super().__init__(name=name, reduction="mean_with_sample_weight", **kwargs)
        self.temperature = float(temperature)
        self.multi_label = multi_label

    def call(self, teacher_logits, student_logits):
        t = ops.cast(teacher_logits, "float32") / self.temperature  # [..., C]
        s = ops.cast(student_logits, "float32") / self.temperature
        if self.multi_label:
            # KL of Bernoulli(p) || Bernoulli(q) per class, with log-sigmoids for stability.
            p = ops.sigmoid(t)
            kl = p * (ops.log_sigmoid(t) - ops.log_sigmoid(s)) + (1.0 - p) * (
                ops.log_sigmoid(-t) - ops.log_sigmoid(-s)
            )
        else:
            log_p = ops.log_softmax(t, axis=-1)
            kl = ops.exp(log_p) * (log_p - ops.log_softmax(s, axis=-1))
        return ops.sum(kl, axis=-1) * (self.temperature**2)  # [...]

    def get_config(self):
        config = super().get_config()
        config.update({"temperature": self.temperature, "multi_label": self.multi_label})
        config.pop("reduction", None)
        return config
