"""Knowledge distillation: a student head trained with `model.fit` to match a frozen
teacher's softened outputs, optionally mixed with the labels' own loss.

The teacher runs inside each training step (frozen, in inference mode), so any transfer set
works without a pass that writes teacher logits to disk, augmented text included, and
distribution strategies and mixed precision apply to both models as they apply to any
Keras model. For a fixed transfer set trained over several epochs (or several students),
the teacher's logits can be computed once (`teacher_logits`) and passed in the inputs
under `"teacher_logits"`: the step then skips the teacher's forward pass, which for a
MiniLM teacher and a tiny student is most of the step's work.

Shape legend: B batch, T tokens, C classes.
"""

import keras
from keras import ops

from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.bert_task import BertTask
from keras_bert_impl.models.bert_token_classifier import BertTokenClassifier
from keras_bert_impl.models.distillation_loss import DistillationLoss
from keras_bert_impl.validation import check_probability


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class Distiller(keras.Model):
    """Trains `student` on `(1 - alpha) * T² KL(teacher/T || student/T) + alpha * labels' loss`.

    Calling the Distiller runs the student: predictions, evaluation and export use it
    directly (`distiller.student`). Fit on `(x, y)` with labels, or on `x` alone (alpha 0)
    for an unlabeled transfer set the teacher labels as it goes. An `x` that holds
    `"teacher_logits"` ([B, C] or [B, T, C], from `teacher_logits(x)`) uses them instead of
    running the teacher, and an `x` that holds `"label_weight"` ([B], 1 for a labelled row,
    0 for a transfer-set row whose label is a placeholder) weighs the labels' term row by
    row, so one batch can mix labelled and unlabeled rows.

    Args:
        teacher: a fine-tuned `BertClassifier` or `BertTokenClassifier` with `logits` output;
            frozen here.
        student: a head of the same kind, classes and label type, whose backbone uses the
            teacher's vocabulary (any depth and width).
        temperature: float > 0, the softening of both distributions.
        alpha: float in [0, 1], the weight of the labels' own loss (the student's
            `default_loss`); 0 = soft targets only.

    Example:
    >>> teacher = kb.BertClassifier(kb.BertBackbone.from_preset("bert_mini"), num_classes=2)
    >>> student = kb.BertClassifier(kb.BertBackbone.from_preset("bert_tiny"), num_classes=2)
    >>> distiller = Distiller(teacher, student, temperature=2.0, alpha=0.5)
    >>> x = {"token_ids": np.array([[101, 7592, 102]]), "segment_ids": np.zeros((1, 3), "int32"),
    ...      "padding_mask": np.ones((1, 3), "int32")}
    >>> history = distiller.fit(x, np.array([1]), epochs=1, verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'loss']
    """

    def __init__(self, teacher, student, temperature=2.0, alpha=0.0, **kwargs):
        super().__init__(**kwargs)
        for name, model in (("teacher", teacher), ("student", student)):
            if not isinstance(model, (BertClassifier, BertTokenClassifier)) or "logits" not in model.output:
                raise ValueError(
                    f"{name} must be a BertClassifier or BertTokenClassifier with logits output (activation=None). "
                    f"Received: {type(model).__name__}"
                    + (f" with outputs {sorted(model.output)}" if isinstance(model, BertTask) else "")
                )
        if type(teacher) is not type(student):
            raise ValueError(f"teacher and student must be the same kind of head. Received: {type(teacher).__name__} "
                             f"and {type(student).__name__}")
        if teacher.num_classes != student.num_classes:
            raise ValueError(f"teacher and student must predict the same classes. Received: num_classes "
                             f"{teacher.num_classes} and {student.num_classes}")
        if getattr(teacher, "multi_label", False) != getattr(student, "multi_label", False):
            raise ValueError("teacher and student must both be multi-label or both not.")
        _check_same_vocabulary(teacher.backbone, student.backbone)
        check_probability("alpha", alpha)
        self.distillation_loss = DistillationLoss(temperature, multi_label=getattr(student, "multi_label", False))
        self.teacher = teacher
        self.teacher.trainable = False
        self.student = student
        self.temperature = float(temperature)
        self.alpha = float(alpha)
        self.token_level = isinstance(student, BertTokenClassifier)
        self.compile()

    def call(self, inputs, training=False):
        return self.student(_model_inputs(inputs), training=training)

    @property
    def inference_model(self):
        """What a checkpoint or export of the Distiller saves: the student alone."""
        return self.student

    def teacher_logits(self, x, batch_size=64, verbose=0):
        """The frozen teacher's logits for `x` (a dict of arrays or a dataset of such
        dicts), as a numpy array to store beside a fixed transfer set as its
        `"teacher_logits"`."""
        return self.teacher.predict(x, batch_size=batch_size, verbose=verbose)["logits"]

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """Keras' compile; "auto": Adam at the student's fine-tuning rate, the student's own
        loss for the label term and its metrics."""

        def auto(value):
            return isinstance(value, str) and value == "auto"

        super().compile(
            optimizer=keras.optimizers.Adam(self.student.default_learning_rate) if auto(optimizer) else optimizer,
            loss=self.student.default_loss() if auto(loss) else loss,
            metrics=self.student.default_metrics() if auto(metrics) else metrics,
            **kwargs,
        )

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if TEACHER_LOGITS in x:
            teacher_logits = ops.cast(x[TEACHER_LOGITS], "float32")  # computed once, beside the transfer set
        else:
            teacher_logits = ops.stop_gradient(self.teacher(_model_inputs(x), training=False)["logits"])  # [B, C] or [B, T, C]
        # Token-level: padded positions carry no teacher signal.
        weight = ops.cast(x["padding_mask"], "float32") if self.token_level else sample_weight
        loss = (1.0 - self.alpha) * self.distillation_loss(teacher_logits, y_pred["logits"], sample_weight=weight)
        if self.alpha > 0:
            if y is None:
                raise ValueError(f"alpha={self.alpha} weighs the labels' loss, but the data has no labels: pass (x, y), "
                                 "or alpha=0 for an unlabeled transfer set.")
            label_weight = x.get(LABEL_WEIGHT) if isinstance(x, dict) else None
            if label_weight is not None:
                label_weight = ops.cast(label_weight, "float32")  # [B]
                sample_weight = label_weight if sample_weight is None else label_weight * ops.cast(sample_weight, "float32")
            loss = loss + self.alpha * super().compute_loss(x, y, y_pred, sample_weight, training=training)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if y is None:
            # An unlabeled transfer set: the loss is all there is to report.
            return self.get_metrics_result()
        if isinstance(x, dict) and LABEL_WEIGHT in x:
            # Transfer-set rows carry placeholder labels: the metrics count labelled rows only.
            sample_weight = x[LABEL_WEIGHT] if sample_weight is None else x[LABEL_WEIGHT] * sample_weight
        return super().compute_metrics(x, y, y_pred, sample_weight)

    def get_metrics_result(self):
        # The compiled metrics are built by their first labelled batch; on an unlabeled
        # transfer set they never are, and only the loss is reported.
        results = {}
        for metric in self.metrics:
            if metric.name == "compile_metrics" and not metric.built:
                continue
            result = metric.result()
            results.update(result if isinstance(result, dict) else {metric.name: result})
        return results

    def get_config(self):
        config = super().get_config()
        config.update({
            "teacher": keras.layers.serialize(self.teacher),
            "student": keras.layers.serialize(self.student),
            "temperature": self.temperature,
            "alpha": self.alpha,
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["teacher"] = keras.layers.deserialize(config["teacher"])
        config["student"] = keras.layers.deserialize(config["student"])
        return cls(**config)


TEACHER_LOGITS, LABEL_WEIGHT = "teacher_logits", "label_weight"


def _model_inputs(inputs):
    """The models' own inputs: the dict without the Distiller's own entries."""
    if isinstance(inputs, dict) and (TEACHER_LOGITS in inputs or LABEL_WEIGHT in inputs):
        return {key: value for key, value in inputs.items() if key not in (TEACHER_LOGITS, LABEL_WEIGHT)}
    return inputs


def _check_same_vocabulary(teacher, student):
    if teacher.vocabulary_size != student.vocabulary_size:
        raise ValueError(
            f"The teacher's and the student's token embeddings have {teacher.vocabulary_size} and "
            f"{student.vocabulary_size} rows: the same ids would mean different tokens. Give the student the teacher's "
            "vocabulary (BertBackbone.from_preset(name, vocabulary_size=...) and set_vocabulary)."
        )
    if teacher.vocabulary is not None and student.vocabulary is not None:
        if list(teacher.vocabulary) != list(student.vocabulary) or teacher.lowercase != student.lowercase:
            first = next((i for i, (a, b) in enumerate(zip(teacher.vocabulary, student.vocabulary)) if a != b), None)
            where = f"token {first}: {teacher.vocabulary[first]!r} vs {student.vocabulary[first]!r}" if first is not None else "casing"
            raise ValueError(f"The teacher's and the student's vocabularies differ ({where}): distill into a student "
                             "that tokenizes like the teacher.")
