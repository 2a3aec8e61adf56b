"""Knowledge distillation: a student head trained with `model.fit` to match a frozen
teacher's softened outputs, optionally mixed with the labels' own loss.

The teacher runs inside each training step (frozen, in inference mode), so any transfer set
works without a pass that writes teacher logits to disk, augmented text included, and
distribution strategies and mixed precision apply to both models as they apply to any
Keras model. For a fixed transfer set trained over several epochs (or several students),
the teacher's logits can be computed once (`teacher_logits`) and passed in the inputs
under `"teacher_logits"`: the step then skips the teacher's forward pass, which for a
MiniLM teacher and a tiny student is most of the step's work.

General (task-agnostic) distillation, TinyBERT's first stage, is the same class with no
logits term: given two `BertBackbone`s, the student backbone learns the teacher's layers on
unlabeled text, and what it leaves is an ordinary `BertBackbone` to fine-tune or to start a
task distillation from.

Intermediate-layer transfer (TinyBERT, Jiao et al. 2020) is opt-in for heads: with a `layer_map` the
student's hidden states (and optionally attention probabilities, and its embedding output)
are also pulled towards the teacher's mapped layers. The intermediate tensors come from
second functional graphs over the same layer objects (`BertBackbone.layer_outputs`), so
weights are shared and the saved student is unchanged.

Shape legend: B batch, T tokens, C classes, H width (Hs student, Ht teacher), K mapped
layers, N heads.
"""

import keras
from keras import ops

from keras_bert_impl.tensor_names import MODEL_ID_INPUTS
from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.bert_task import BertTask
from keras_bert_impl.models.bert_token_classifier import BertTokenClassifier
from keras_bert_impl.models.distillation_argument_error import DistillationArgumentError
from keras_bert_impl.models.distillation_settings import check_distillation_settings
from keras_bert_impl.distillation_defaults import DISTILLATION_DEFAULTS
from keras_bert_impl.models.distillation_term import DistillationTerm
from keras_bert_impl.models.transfer_terms import (
    check_same_vocabulary,
    check_transfer,
    real_tokens,
    replicas_in_sync,
    resolve_layer_map,
    select_features,
    wanted_features,
)

# The intermediate-layer terms, in the order the loss adds them.
TRANSFER_KINDS = ("hidden", "attention", "embedding")


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class Distiller(keras.Model):
    """Trains `student` to match the frozen `teacher`: a sum of weighted terms, each a
    `DistillationTerm` that owns its projection, tracker and config.

    The terms:
    - logits (heads only): `(1 - alpha) * T² KL(teacher/T || student/T) + alpha * labels' loss`;
    - `hidden_weight` * the mean squared error between student layer i's output (hidden
      state i + 1) and the teacher's hidden state `layer_map[i]`, the student's states
      through a learned `Dense(teacher width, use_bias=False)` (TinyBERT's W_h) when the
      widths differ, averaged over the mapped layers, the width and the real tokens;
    - `attention_weight` * KL(teacher || student) of each head's attention probabilities
      over the keys, for the same layer pairs, averaged over the layers, heads and real
      query tokens (padded keys carry no probability and are left out); the two models
      need the same number of heads;
    - `embedding_weight` * the same mean squared error between the embedding outputs
      (hidden state 0), through a projection of its own.
    Each intermediate term is reported in `fit`'s logs (`hidden_loss`, `attention_loss`,
    `embedding_loss`). The projections belong to the Distiller (saved with it, trained,
    never part of the student).

    Task distillation (`teacher`, `student`: heads): calling the Distiller runs the student:
    predictions, evaluation and export use it directly (`distiller.student`). Fit on
    `(x, y)` with labels, or on `x` alone (alpha 0) for an unlabeled transfer set the
    teacher labels as it goes. An `x` that holds `"teacher_logits"` ([B, C] or [B, T, C],
    from `teacher_logits(x)`) uses them instead of running the teacher (refused while an
    intermediate term is on: those need the teacher's pass), and an `x` that holds
    `"label_weight"` ([B], 1 for a labelled row, 0 for a transfer-set row whose label is a
    placeholder) weighs the labels' term row by row. With an intermediate term, calling the
    Distiller also returns the student's intermediate tensors (`embedding_output`,
    `hidden_states`, `attention_probs`) beside its outputs, for the loss; `predict` returns
    the student's outputs alone.

    General distillation (`teacher`, `student`: `BertBackbone`s) is the same class with no
    logits term: no labels, fit on the backbone's input dicts alone; calling it returns the
    student's intermediate tensors. `layer_map` defaults to "uniform" and `hidden_weight`
    to 1 there (`DISTILLATION_DEFAULTS`).

    Every bad argument raises a `DistillationArgumentError` (a ValueError) whose `argument`
    names it.

    Args:
        teacher: a fine-tuned `BertClassifier` or `BertTokenClassifier` with `logits` output,
            or a `BertBackbone` (general distillation); frozen here.
        student: a model of the same kind (head: same classes and label type), whose
            backbone uses the teacher's vocabulary (any depth and width).
        temperature: float > 0, the softening of both distributions (heads).
        alpha: float in [0, 1], the weight of the labels' own loss (the student's
            `default_loss`); 0 = soft targets only; must be 0 for backbones.
        layer_map: None (no intermediate transfer; "uniform" for backbones with a mapped
            term), a list with one teacher hidden-state index in [1, teacher layers] per
            student layer, or "uniform": TinyBERT's m(i) = (i + 1) * teacher_layers // student_layers.
        hidden_weight: float >= 0, the weight of the hidden states' MSE (needs layer_map);
            None: 0 for heads, 1 for backbones.
        attention_weight: float >= 0, the weight of the attention KL (needs layer_map and
            equal head counts).
        embedding_weight: float >= 0, the weight of the embedding outputs' MSE.

    Example:
    >>> teacher = kb.BertClassifier(kb.BertBackbone.from_preset("bert_mini"), num_classes=2)
    >>> student = kb.BertClassifier(kb.BertBackbone.from_preset("bert_tiny"), num_classes=2)
    >>> distiller = Distiller(teacher, student, temperature=2.0, alpha=0.5)
    >>> x = {"token_ids": np.array([[101, 7592, 102]]), "segment_ids": np.zeros((1, 3), "int32"),
    ...      "padding_mask": np.ones((1, 3), "int32")}
    >>> history = distiller.fit(x, np.array([1]), epochs=1, verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'loss']
    >>> tinybert = Distiller(teacher, student, layer_map="uniform", hidden_weight=1.0)
    >>> tinybert.mapped_layers  # student layer i (0-based) learns the teacher's hidden state m(i)
    [2, 4]
    >>> general = Distiller(teacher.backbone, student.backbone, embedding_weight=1.0)  # no logits term
    >>> sorted(general.fit(x, epochs=1, verbose=0).history)
    ['embedding_loss', 'hidden_loss', 'loss']
    """

    def __init__(
        self,
        teacher,
        student,
        temperature=DISTILLATION_DEFAULTS.temperature,
        alpha=DISTILLATION_DEFAULTS.alpha,
        layer_map=None,
        hidden_weight=None,
        attention_weight=0.0,
        embedding_weight=0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.general = isinstance(teacher, BertBackbone)
        _check_models(teacher, student, self.general)
        teacher_backbone = teacher if self.general else teacher.backbone
        student_backbone = student if self.general else student.backbone
        try:
            check_same_vocabulary(teacher_backbone, student_backbone)
        except ValueError as e:
            raise DistillationArgumentError("student", str(e)) from None
        settings = check_distillation_settings(
            self.general, temperature, alpha, hidden_weight, attention_weight, embedding_weight, layer_map
        )
        weights = {kind: settings[f"{kind}_weight"] for kind in TRANSFER_KINDS}
        self.hidden_weight, self.attention_weight, self.embedding_weight = weights.values()
        self.alpha = settings["alpha"]
        self.temperature = float(temperature)
        layer_map = settings["layer_map"]
        self.teacher = teacher
        self.teacher.trainable = False
        self.student = student
        self.layer_map = layer_map
        self.mapped_layers = resolve_layer_map(
            layer_map, teacher_backbone.num_layers, student_backbone.num_layers
        )
        check_transfer(self.attention_weight, teacher_backbone, student_backbone)
        self.logits_term = (
            None
            if self.general
            else DistillationTerm(
                "logits",
                1.0 - self.alpha,
                temperature=temperature,
                alpha=self.alpha,
                multi_label=getattr(student, "multi_label", False),
            )
        )
        self.token_level = isinstance(student, BertTokenClassifier)
        widths = dict(student_width=student_backbone.hidden_dim, teacher_width=teacher_backbone.hidden_dim)
        # Plain objects, out of Keras' tracking: their projections and trackers are tracked
        # below, under the Distiller's own attribute names (the .keras layout).
        self._terms = [
            DistillationTerm(kind, weight, **widths) for kind, weight in weights.items() if weight > 0
        ]
        self.hidden_projection = self._projection("hidden")
        self.embedding_projection = self._projection("embedding")
        self.trackers = {term.name: term.tracker for term in self._terms}
        self._features = None
        if self._terms:
            wanted = wanted_features(self.hidden_weight, self.attention_weight, self.embedding_weight)
            teacher_layers = [m - 1 for m in self.mapped_layers] if self.mapped_layers else []
            # A plain holder, not an attribute Keras tracks: the feature models hold no weights
            # of their own, and saving them would store the teacher's and student's twice.
            self._features = _FeatureModels(
                teacher=_feature_model(teacher, wanted, teacher_layers),
                student=_feature_model(
                    student, wanted, list(range(student_backbone.num_layers))
                ),  # all mapped
            )
        self.compile()

    def _projection(self, kind):
        return next((term.projection for term in self._terms if term.kind == kind), None)

    @property
    def terms(self):
        """The loss's terms (`DistillationTerm`), logits first when there is one."""
        return ([self.logits_term] if self.logits_term else []) + list(self._terms)

    def call(self, inputs, training=False):
        inputs = _model_inputs(inputs)
        if self._features is None:
            return self.student(inputs, training=training)
        # One student forward pass gives the outputs and the intermediate tensors.
        return self._features.student(inputs, training=training)

    def predict_step(self, data):
        outputs = super().predict_step(data)
        if self.general:
            return outputs
        return {key: value for key, value in outputs.items() if key not in FEATURES}

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
        loss for the label term and its metrics; for backbones Adam at 1e-4 (TinyBERT's
        general-distillation rate), no loss or metrics of Keras' own."""

        def auto(value):
            return isinstance(value, str) and value == "auto"

        if self.general:
            super().compile(optimizer=keras.optimizers.Adam(1e-4) if auto(optimizer) else optimizer, **kwargs)
            return
        super().compile(
            optimizer=keras.optimizers.Adam(self.student.default_learning_rate)
            if auto(optimizer)
            else optimizer,
            loss=self.student.default_loss() if auto(loss) else loss,
            metrics=self.student.default_metrics() if auto(metrics) else metrics,
            **kwargs,
        )

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        student_features = {key: y_pred[key] for key in FEATURES if key in y_pred}
        y_pred = {key: value for key, value in y_pred.items() if key not in FEATURES}
        teacher_features = teacher_logits = None
        if self._features is not None:
            if TEACHER_LOGITS in x:
                raise ValueError(
                    "The inputs carry teacher_logits, but intermediate-layer transfer (layer_map, hidden_weight, "
                    "attention_weight, embedding_weight) needs the teacher's own forward pass on every step, so the "
                    "cached logits would save nothing: drop teacher_logits from the inputs."
                )
            missing = [
                key
                for key in self._features.student.output
                if key not in y_pred and key not in student_features
            ]
            if missing:
                raise ValueError(
                    f"y_pred lacks {missing}: pass the Distiller's own outputs (distiller(x)), which hold "
                    "the student's intermediate tensors beside its logits."
                )
            teacher_features = {
                key: ops.stop_gradient(value)
                for key, value in self._features.teacher(_model_inputs(x), training=False).items()
            }
            teacher_logits = teacher_features.pop("logits", None)
        elif TEACHER_LOGITS in x:
            teacher_logits = ops.cast(x[TEACHER_LOGITS], "float32")  # computed once, beside the transfer set
        else:
            teacher_logits = ops.stop_gradient(
                self.teacher(_model_inputs(x), training=False)["logits"]
            )  # [B, C] or [B, T, C]
        loss = 0.0
        if self.logits_term is not None:
            # Token-level: padded positions carry no teacher signal.
            weight = ops.cast(x["padding_mask"], "float32") if self.token_level else sample_weight
            loss = self.logits_term.weight * self.logits_term(
                y_pred["logits"], teacher_logits, None, None, sample_weight=weight
            )
        if teacher_features is not None:
            for name, term in self.transfer_terms(
                student_features, teacher_features, x["padding_mask"]
            ).items():
                loss = loss + self._term(name).weight * term
                # Each replica's term is its share of the global batch's mean (see
                # transfer_terms.real_tokens): times the replica count, the Mean over replicas reports it.
                self.trackers[name].update_state(term * replicas_in_sync())
        if self.alpha > 0:
            if y is None:
                raise ValueError(
                    f"alpha={self.alpha} weighs the labels' loss, but the data has no labels: pass (x, y), "
                    "or alpha=0 for an unlabeled transfer set."
                )
            label_weight = x.get(LABEL_WEIGHT) if isinstance(x, dict) else None
            if label_weight is not None:
                label_weight = ops.cast(label_weight, "float32")  # [B]
                sample_weight = (
                    label_weight
                    if sample_weight is None
                    else label_weight * ops.cast(sample_weight, "float32")
                )
            loss = loss + self.alpha * super().compute_loss(x, y, y_pred, sample_weight, training=training)
        return loss

    def _term(self, name):
        return next(term for term in self._terms if term.name == name)

    def transfer_terms(self, student, teacher, padding_mask):
        """The intermediate-layer terms, unweighted: {"hidden_loss", "attention_loss",
        "embedding_loss"} (those with a weight > 0), from the student's and the teacher's
        feature dicts (`embedding_output` [B, T, H], `hidden_states` [B, K, T, H],
        `attention_probs` [B, K, N, T, T]) and the padding mask [B, T]: each a mean over the
        global batch's real tokens (`transfer_terms.real_tokens`)."""
        mask, tokens = real_tokens(padding_mask)
        return {
            term.name: term(student[term.feature], teacher[term.feature], mask, tokens)
            for term in self._terms
        }

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        y_pred = {key: value for key, value in y_pred.items() if key not in FEATURES}
        if y is None:
            # An unlabeled transfer set (general distillation's always): the loss and the
            # terms are all there is to report.
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
        config.update(
            {
                "teacher": keras.layers.serialize(self.teacher),
                "student": keras.layers.serialize(self.student),
                "layer_map": self.layer_map,
                # A term that is off has no object: its weight is 0 (not the default, which
                # for hidden_weight of backbones is 1).
                **{f"{kind}_weight": 0.0 for kind in TRANSFER_KINDS},
            }
        )
        for term in self.terms:
            config.update(term.get_config())
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["teacher"] = keras.layers.deserialize(config["teacher"])
        config["student"] = keras.layers.deserialize(config["student"])
        return cls(**config)


TEACHER_LOGITS, LABEL_WEIGHT = "teacher_logits", "label_weight"
# What the feature models output beside the heads' own outputs (those the terms need).
FEATURES = ("embedding_output", "hidden_states", "attention_probs")


def _check_models(teacher, student, general):
    """Two backbones, or two heads of one kind with logits, the same classes and label type."""
    if general:
        for name, model in (("teacher", teacher), ("student", student)):
            if not isinstance(model, BertBackbone):
                raise DistillationArgumentError(
                    name,
                    f"{name} must be a BertBackbone like the teacher (general distillation works on encoders; "
                    f"task distillation takes two heads). Received: {type(model).__name__}",
                )
        return
    for name, model in (("teacher", teacher), ("student", student)):
        if not isinstance(model, (BertClassifier, BertTokenClassifier)) or "logits" not in model.output:
            raise DistillationArgumentError(
                name,
                f"{name} must be a BertClassifier or BertTokenClassifier with logits output (activation=None), "
                "or both teacher and student a BertBackbone (general distillation). "
                f"Received: {type(model).__name__}"
                + (f" with outputs {sorted(model.output)}" if isinstance(model, BertTask) else ""),
            )
    if type(teacher) is not type(student):
        raise DistillationArgumentError(
            "student",
            f"teacher and student must be the same kind of head. Received: "
            f"{type(teacher).__name__} and {type(student).__name__}",
        )
    if teacher.num_classes != student.num_classes:
        raise DistillationArgumentError(
            "student",
            f"teacher and student must predict the same classes. Received: "
            f"num_classes {teacher.num_classes} and {student.num_classes}",
        )
    if getattr(teacher, "multi_label", False) != getattr(student, "multi_label", False):
        raise DistillationArgumentError(
            "student", "teacher and student must both be multi-label or both not."
        )


class _FeatureModels:
    """The teacher's and the student's feature models, out of Keras' attribute tracking."""

    def __init__(self, teacher, student):
        self.teacher = teacher
        self.student = student


def _feature_model(model, wanted, layers):
    """A functional model over `model`'s own layers (weights shared) whose outputs are the
    wanted intermediate tensors of its backbone (`embedding_output` [B, T, H],
    `hidden_states` [B, K, T, H] of `layers` (0-based transformer layers: their outputs),
    `attention_probs` [B, K, N, T, T] of the same layers), beside a head's own outputs."""
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in MODEL_ID_INPUTS}
    if isinstance(model, BertBackbone):
        outputs = model.layer_outputs(inputs, return_attention_scores=wanted["attention_probs"])
        return keras.Model(inputs, select_features(outputs, wanted, layers), name=f"{model.name}_features")
    backbone = model.backbone
    features = {}

    def call_function(layer, *args, **kwargs):
        if layer is not backbone:
            return layer(*args, **kwargs)
        outputs = backbone.layer_outputs(args[0], return_attention_scores=wanted["attention_probs"])
        features.update(select_features(outputs, wanted, layers))
        hidden = outputs["hidden_states"]
        # The head's graph reads the backbone's outputs by position: give it the same structure.
        own = {"sequence_output": outputs["sequence_output"], "pooled_output": outputs["pooled_output"]}
        if backbone.return_hidden_states:
            own["hidden_states"] = ops.stack(hidden, axis=1)
        if backbone.return_attention_scores:
            own["attention_probs"] = ops.stack(outputs["attention_probs"], axis=1)
        return own

    # clone_model with the layers themselves (not copies) replays the head's graph on new
    # inputs; only the backbone's call is replaced by its layers' calls. It replays an
    # uncompiled view of the head (same graph, no new nodes): cloning a compiled model
    # also compiles the clone, which for a trained teacher builds a second optimizer state.
    view = keras.Model(model.input, model.output)
    replayed = keras.models.clone_model(
        view, input_tensors=inputs, clone_function=lambda layer: layer, call_function=call_function
    )
    return keras.Model(inputs, {**replayed.output, **features}, name=f"{model.name}_features")


def _model_inputs(inputs):
    """The models' own inputs: the dict without the Distiller's own entries."""
    if isinstance(inputs, dict) and any(key not in MODEL_ID_INPUTS for key in inputs):
        return {key: value for key, value in inputs.items() if key in MODEL_ID_INPUTS}
    return inputs
