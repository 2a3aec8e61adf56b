"""Knowledge distillation: a student trained with `model.fit` to match a frozen teacher, the
loss a sum of weighted term objects (`terms.py`), as in Keras 3.15's `keras.distillation`.

The teacher runs inside each training step (frozen, in inference mode), so any transfer set
works without a pass that writes teacher logits to disk, augmented text included, and
distribution strategies and mixed precision apply to both models as they apply to any
Keras model. For a fixed transfer set trained over several epochs (or several students),
the teacher's logits can be computed once (`teacher_logits`) and passed in the inputs
under `"teacher_logits"`: the step then skips the teacher's forward pass.

General (task-agnostic) distillation, TinyBERT's first stage, is the same class given two
`BertBackbone`s and no `LogitsTerm`: the student backbone learns the teacher's layers on
unlabeled text, and what it leaves is an ordinary `BertBackbone` to fine-tune or to start a
task distillation from.

The intermediate terms read second functional graphs over the same layer objects
(`BertBackbone.layer_outputs`), so weights are shared and the saved student is unchanged.

Shape legend: B batch, T tokens, C classes, H width, K mapped layers, N heads.
"""

import keras
from keras import ops

from keras_bert_impl.distillation_defaults import DISTILLATION_DEFAULTS
from keras_bert_impl.tensor_names import MODEL_ID_INPUTS
from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.bert_task import BertTask
from keras_bert_impl.models.bert_token_classifier import BertTokenClassifier
from keras_bert_impl.models.distillation.terms import (
    AttentionTerm,
    DistillationArgumentError,
    DistillationTerm,
    EmbeddingTerm,
    HiddenStatesTerm,
    LogitsTerm,
    real_tokens,
)

TEACHER_LOGITS, LABEL_WEIGHT = "teacher_logits", "label_weight"
# What the feature models output beside the heads' own outputs (those the terms need).
FEATURES = ("embedding_output", "hidden_states", "attention_probs")
# The order the loss adds the terms in, whatever the order they were given in.
KINDS = ("logits", "hidden", "attention", "embedding")


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class Distiller(keras.Model):
    """Trains `student` to match the frozen `teacher`: the sum of `terms`, each weighted by
    its own `weight` (`LogitsTerm`: 1 - alpha, beside alpha * the labels' loss).

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

    General distillation (`teacher`, `student`: `BertBackbone`s) is the terms without a
    `LogitsTerm`: no labels, fit on the backbone's input dicts alone; calling it returns the
    student's intermediate tensors.

    Each intermediate term is reported in `fit`'s logs (`hidden_loss`, `attention_loss`,
    `embedding_loss`). Its projection belongs to the Distiller (saved with it, trained, never
    part of the student). Every bad argument raises a `DistillationArgumentError` (a
    ValueError) whose `argument` names it.

    Args:
        teacher: a fine-tuned `BertClassifier` or `BertTokenClassifier` with `logits` output,
            or a `BertBackbone` (general distillation); frozen here.
        student: a model of the same kind (head: same classes and label type), whose
            backbone uses the teacher's vocabulary (any depth and width).
        terms: a list of `DistillationTerm`s, at most one of each kind: `LogitsTerm`,
            `HiddenStatesTerm`, `AttentionTerm`, `EmbeddingTerm`. None: `[LogitsTerm()]` for
            heads, `[HiddenStatesTerm()]` (uniform layer map) for backbones.

    Example:
    >>> teacher = kb.BertClassifier(kb.BertBackbone.from_preset("bert_mini"), num_classes=2)
    >>> student = kb.BertClassifier(kb.BertBackbone.from_preset("bert_tiny"), num_classes=2)
    >>> distiller = Distiller(teacher, student, [kb.LogitsTerm(temperature=2.0, alpha=0.5)])
    >>> x = {"token_ids": np.array([[101, 7592, 102]]), "segment_ids": np.zeros((1, 3), "int32"),
    ...      "padding_mask": np.ones((1, 3), "int32")}
    >>> sorted(distiller.fit(x, np.array([1]), epochs=1, verbose=0).history)
    ['accuracy', 'loss']
    >>> tinybert = Distiller(teacher, student, [kb.LogitsTerm(), kb.HiddenStatesTerm(1.0)])
    >>> tinybert.mapped_layers  # student layer i (0-based) learns the teacher's hidden state m(i)
    [2, 4]
    >>> general = Distiller(teacher.backbone, student.backbone, [kb.HiddenStatesTerm(), kb.EmbeddingTerm()])
    >>> sorted(general.fit(x, epochs=1, verbose=0).history)
    ['embedding_loss', 'hidden_loss', 'loss']
    """

    def __init__(self, teacher, student, terms=None, **kwargs):
        super().__init__(**kwargs)
        _check_models(teacher, student)
        self.teacher = teacher
        self.teacher.trainable = False
        self.student = student
        terms = _checked_terms(teacher, terms)
        for term in terms:
            term.build(teacher, student)
        self.logits_term = next((term for term in terms if isinstance(term, LogitsTerm)), None)
        # Plain objects, out of Keras' tracking: their projections and trackers are tracked
        # below, under the Distiller's own attribute names (the .keras layout).
        self._transfer = [term for term in terms if term is not self.logits_term]
        self.hidden_projection = self._projection("hidden")
        self.embedding_projection = self._projection("embedding")
        self.trackers = {term.name: term.tracker for term in self._transfer}
        self._features = None
        if self._transfer:
            # A plain holder, not an attribute Keras tracks: the feature models hold no weights
            # of their own, and saving them would store the teacher's and student's twice.
            self._features = _FeatureModels(
                teacher=_feature_model(teacher, self._transfer, of_teacher=True),
                student=_feature_model(student, self._transfer, of_teacher=False),
            )
        self.compile()

    def _projection(self, kind):
        return next((term.projection for term in self._transfer if term.kind == kind), None)

    @property
    def terms(self):
        """The loss's terms, logits first when there is one, then in `KINDS` order."""
        return ([self.logits_term] if self.logits_term else []) + list(self._transfer)

    @property
    def mapped_layers(self):
        """The teacher hidden state each student layer learns (the first mapped term's), or None."""
        return next((term.mapped_layers for term in self._transfer if hasattr(term, "mapped_layers")), None)

    def call(self, inputs, training=False):
        inputs = _model_inputs(inputs)
        if self._features is None:
            return self.student(inputs, training=training)
        # One student forward pass gives the outputs and the intermediate tensors.
        return self._features.student(inputs, training=training)

    def predict_step(self, data):
        outputs = super().predict_step(data)
        # A head's own outputs; a backbone's features are all it has.
        return {key: value for key, value in outputs.items() if key not in FEATURES} or outputs

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
        general-distillation rate), no loss or metrics."""
        head = isinstance(self.student, BertTask)

        def auto(value, default):
            return default() if isinstance(value, str) and value == "auto" else value

        super().compile(
            optimizer=auto(
                optimizer, lambda: keras.optimizers.Adam(self.student.default_learning_rate if head else 1e-4)
            ),
            loss=auto(loss, lambda: self.student.default_loss() if head else None),
            metrics=auto(metrics, lambda: self.student.default_metrics() if head else None),
            **kwargs,
        )

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        student_features = {key: y_pred[key] for key in FEATURES if key in y_pred}
        y_pred = {key: value for key, value in y_pred.items() if key not in FEATURES}
        teacher = self._teacher_outputs(x, y_pred, student_features)
        loss = 0.0
        if self.logits_term is not None:
            # Token-level: padded positions carry no teacher signal.
            weight = ops.cast(x["padding_mask"], "float32") if self.logits_term.token_level else sample_weight
            kd = self.logits_term(y_pred["logits"], teacher["logits"], sample_weight=weight)
            loss = self.logits_term.weight * kd
        if self._transfer:
            for name, term in self.transfer_terms(student_features, teacher, x["padding_mask"]).items():
                loss = loss + self._term(name).weight * term
                # Each replica's term is its share of the global batch's mean (see
                # terms.real_tokens): times the replica count, the Mean over replicas reports it.
                self.trackers[name].update_state(term * _replicas_in_sync())
        if self.logits_term is not None:
            loss = loss + self._labels_loss(x, y, y_pred, sample_weight, training)
        return loss

    def _teacher_outputs(self, x, y_pred, student_features):
        """The frozen teacher's logits and features for the batch, or the cached logits."""
        if self._features is None:
            if TEACHER_LOGITS in x:
                return {"logits": ops.cast(x[TEACHER_LOGITS], "float32")}  # computed once, beside the set
            return {"logits": ops.stop_gradient(self.teacher(_model_inputs(x), training=False)["logits"])}
        if TEACHER_LOGITS in x:
            raise ValueError(
                "The inputs carry teacher_logits, but intermediate-layer transfer (a hidden, attention or "
                "embedding term) needs the teacher's own forward pass on every step, so the cached logits "
                "would save nothing: drop teacher_logits from the inputs."
            )
        missing = [
            key for key in self._features.student.output if key not in y_pred and key not in student_features
        ]
        if missing:
            raise ValueError(
                f"y_pred lacks {missing}: pass the Distiller's own outputs (distiller(x)), which hold "
                "the student's intermediate tensors beside its logits."
            )
        outputs = self._features.teacher(_model_inputs(x), training=False)
        return {key: ops.stop_gradient(value) for key, value in outputs.items()}

    def _labels_loss(self, x, y, y_pred, sample_weight, training):
        """alpha * the student's compiled loss, `label_weight` row by row."""
        alpha = self.logits_term.alpha
        if alpha == 0:
            return 0.0
        if y is None:
            raise ValueError(
                f"alpha={alpha} weighs the labels' loss, but the data has no labels: pass (x, y), "
                "or alpha=0 for an unlabeled transfer set."
            )
        label_weight = x.get(LABEL_WEIGHT) if isinstance(x, dict) else None
        if label_weight is not None:
            label_weight = ops.cast(label_weight, "float32")  # [B]
            sample_weight = (
                label_weight if sample_weight is None else label_weight * ops.cast(sample_weight, "float32")
            )
        return alpha * super().compute_loss(x, y, y_pred, sample_weight, training=training)

    def _term(self, name):
        return next(term for term in self._transfer if term.name == name)

    def transfer_terms(self, student, teacher, padding_mask):
        """The intermediate terms, unweighted, by name ("hidden_loss", ...), from the
        student's and the teacher's feature dicts (`embedding_output` [B, T, H],
        `hidden_states` [B, K, T, H], `attention_probs` [B, K, N, T, T]) and the padding mask
        [B, T]: each a mean over the global batch's real tokens (`terms.real_tokens`)."""
        mask, tokens = real_tokens(padding_mask)
        return {
            term.name: term(student[term.feature], teacher[term.feature], mask, tokens)
            for term in self._transfer
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
                "terms": [keras.saving.serialize_keras_object(term) for term in self.terms],
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["teacher"] = keras.layers.deserialize(config["teacher"])
        config["student"] = keras.layers.deserialize(config["student"])
        if "terms" in config:
            config["terms"] = [keras.saving.deserialize_keras_object(term) for term in config["terms"]]
        else:
            config["terms"] = _flat_terms(config)
        return cls(**config)


def _flat_terms(config):
    """The terms of a Distiller saved while it took flat arguments (`temperature` and `alpha`
    for heads, `layer_map` and one weight per intermediate term, 0 when off), taken out of
    `config`."""
    terms = [LogitsTerm(config.pop("temperature"), config.pop("alpha"))] if "temperature" in config else []
    layer_map = config.pop("layer_map", None)
    for kind, term in (
        ("hidden", HiddenStatesTerm),
        ("attention", AttentionTerm),
        ("embedding", EmbeddingTerm),
    ):
        weight = config.pop(f"{kind}_weight", 0.0)
        if weight:
            terms.append(term(weight) if kind == "embedding" else term(weight, layer_map=layer_map))
    return terms


def _checked_terms(teacher, terms):
    """The terms in `KINDS` order, the defaults filled in; one of each kind at most."""
    if terms is None:
        if isinstance(teacher, BertBackbone):
            return [HiddenStatesTerm(DISTILLATION_DEFAULTS.general_hidden_weight)]
        return [LogitsTerm()]
    terms = list(terms) if isinstance(terms, (list, tuple)) else [terms]
    wrong = [term for term in terms if not isinstance(term, DistillationTerm) or term.built]
    kinds = [term.kind for term in terms if not wrong]
    if wrong or not terms or len(set(kinds)) != len(kinds):
        raise DistillationArgumentError(
            "terms",
            "terms must be a non-empty list of new DistillationTerms (LogitsTerm, HiddenStatesTerm, "
            "AttentionTerm, EmbeddingTerm: one Distiller builds each), at most one of each kind. "
            f"Received: terms={terms!r}",
        )
    if not any(isinstance(term, LogitsTerm) or term.weight > 0 for term in terms):
        raise DistillationArgumentError(
            "terms",
            "Without a LogitsTerm the loss is the other terms' alone (general distillation learns from the "
            "teacher's layers only): give a term a weight > 0. Received: weights "
            f"{[term.weight for term in terms]}",
        )
    return sorted(terms, key=lambda term: KINDS.index(term.kind))


def _check_models(teacher, student):
    """Two backbones, or two heads of one kind with logits, the same classes and label type."""
    if isinstance(teacher, BertBackbone):
        for name, model in (("teacher", teacher), ("student", student)):
            if not isinstance(model, BertBackbone):
                raise DistillationArgumentError(
                    name,
                    f"{name} must be a BertBackbone like the teacher (general distillation works on "
                    f"encoders; task distillation takes two heads). Received: {type(model).__name__}",
                )
    else:
        _check_heads(teacher, student)
    try:
        check_same_vocabulary(*(m if isinstance(m, BertBackbone) else m.backbone for m in (teacher, student)))
    except ValueError as e:
        raise DistillationArgumentError("student", str(e)) from None


def _check_heads(teacher, student):
    for name, model in (("teacher", teacher), ("student", student)):
        if not isinstance(model, (BertClassifier, BertTokenClassifier)) or "logits" not in model.output:
            raise DistillationArgumentError(
                name,
                f"{name} must be a BertClassifier or BertTokenClassifier with logits output "
                "(activation=None), or both teacher and student a BertBackbone (general distillation). "
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


def check_same_vocabulary(teacher, student):
    """The two backbones must map ids to the same tokens."""
    if teacher.vocabulary_size != student.vocabulary_size:
        raise ValueError(
            f"The teacher's and the student's token embeddings have {teacher.vocabulary_size} and "
            f"{student.vocabulary_size} rows: the same ids would mean different tokens. Give the "
            "student the teacher's vocabulary (BertBackbone.from_preset(name, vocabulary_size=...) and "
            "set_vocabulary)."
        )
    if teacher.vocabulary is not None and student.vocabulary is not None:
        if list(teacher.vocabulary) != list(student.vocabulary) or teacher.lowercase != student.lowercase:
            first = next(
                (i for i, (a, b) in enumerate(zip(teacher.vocabulary, student.vocabulary)) if a != b), None
            )
            where = (
                f"token {first}: {teacher.vocabulary[first]!r} vs {student.vocabulary[first]!r}"
                if first is not None
                else "casing"
            )
            raise ValueError(
                f"The teacher's and the student's vocabularies differ ({where}): distill into a student "
                "that tokenizes like the teacher."
            )


def _replicas_in_sync():
    """How many replicas share the step (1 outside a tf.distribute strategy)."""
    if keras.backend.backend() != "tensorflow":
        return 1
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    return 1 if context is None else context.num_replicas_in_sync


class _FeatureModels:
    """The teacher's and the student's feature models, out of Keras' attribute tracking."""

    def __init__(self, teacher, student):
        self.teacher = teacher
        self.student = student


def _feature_model(model, terms, of_teacher):
    """A functional model over `model`'s own layers (weights shared) whose outputs are the
    terms' features of its backbone (`term.select`), beside a head's own outputs."""
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in MODEL_ID_INPUTS}
    attention = any(isinstance(term, AttentionTerm) for term in terms)

    def select(outputs):
        return {term.feature: term.select(outputs, of_teacher) for term in terms}

    if isinstance(model, BertBackbone):
        outputs = model.layer_outputs(inputs, return_attention_scores=attention)
        return keras.Model(inputs, select(outputs), name=f"{model.name}_features")
    backbone = model.backbone
    features = {}

    def call_function(layer, *args, **kwargs):
        if layer is not backbone:
            return layer(*args, **kwargs)
        outputs = backbone.layer_outputs(args[0], return_attention_scores=attention)
        features.update(select(outputs))
        # The head's graph reads the backbone's outputs by position: give it the same structure.
        own = {"sequence_output": outputs["sequence_output"], "pooled_output": outputs["pooled_output"]}
        if backbone.return_hidden_states:
            own["hidden_states"] = ops.stack(outputs["hidden_states"], axis=1)
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
