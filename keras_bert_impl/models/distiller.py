"""Knowledge distillation: a student head trained with `model.fit` to match a frozen
teacher's softened outputs, optionally mixed with the labels' own loss.

The teacher runs inside each training step (frozen, in inference mode), so any transfer set
works without a pass that writes teacher logits to disk, augmented text included, and
distribution strategies and mixed precision apply to both models as they apply to any
Keras model. For a fixed transfer set trained over several epochs (or several students),
the teacher's logits can be computed once (`teacher_logits`) and passed in the inputs
under `"teacher_logits"`: the step then skips the teacher's forward pass, which for a
MiniLM teacher and a tiny student is most of the step's work.

Intermediate-layer transfer (TinyBERT, Jiao et al. 2020) is opt-in: with a `layer_map` the
student's hidden states (and optionally attention probabilities, and its embedding output)
are also pulled towards the teacher's mapped layers. The intermediate tensors come from
second functional graphs over the same layer objects (`BertBackbone.layer_outputs`), so
weights are shared and the saved student is unchanged.

Shape legend: B batch, T tokens, C classes, H width (Hs student, Ht teacher), K mapped
layers, N heads.
"""

import keras
from keras import ops

from keras_bert_impl.conversion.input_contract import MODEL_ID_INPUTS
from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.bert_task import BertTask
from keras_bert_impl.models.bert_token_classifier import BertTokenClassifier
from keras_bert_impl.models.distillation_loss import DistillationLoss
from keras_bert_impl.models.transfer_terms import (
    TERMS,
    check_same_vocabulary,
    check_transfer,
    projection,
    replicas_in_sync,
    resolve_layer_map,
    select_features,
    transfer_terms,
    wanted_features,
)
from keras_bert_impl.validation import check_non_negative, check_probability


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

    Intermediate-layer transfer (off by default) adds to that loss, TinyBERT's terms:
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
    Each term is reported in `fit`'s logs (`hidden_loss`, `attention_loss`,
    `embedding_loss`). The projections belong to the Distiller (saved with it, trained,
    never part of the student). The teacher's intermediate states need its forward pass,
    so inputs with `"teacher_logits"` are refused while a term is on (the cache would save
    nothing). Calling the Distiller then also returns the student's intermediate tensors
    (`embedding_output`, `hidden_states`, `attention_probs`) beside its outputs, for the
    loss; `predict` returns the student's outputs alone.

    Args:
        teacher: a fine-tuned `BertClassifier` or `BertTokenClassifier` with `logits` output;
            frozen here.
        student: a head of the same kind, classes and label type, whose backbone uses the
            teacher's vocabulary (any depth and width).
        temperature: float > 0, the softening of both distributions.
        alpha: float in [0, 1], the weight of the labels' own loss (the student's
            `default_loss`); 0 = soft targets only.
        layer_map: None (no intermediate transfer), a list with one teacher hidden-state
            index in [1, teacher layers] per student layer, or "uniform": TinyBERT's
            m(i) = (i + 1) * teacher_layers // student_layers.
        hidden_weight: float >= 0, the weight of the hidden states' MSE (needs layer_map).
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
    >>> sorted(tinybert.fit(x, np.array([1]), epochs=1, verbose=0).history)
    ['accuracy', 'hidden_loss', 'loss']
    """

    def __init__(self, teacher, student, temperature=2.0, alpha=0.0, layer_map=None, hidden_weight=0.0,
                 attention_weight=0.0, embedding_weight=0.0, **kwargs):
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
        check_same_vocabulary(teacher.backbone, student.backbone)
        check_probability("alpha", alpha)
        self.distillation_loss = DistillationLoss(temperature, multi_label=getattr(student, "multi_label", False))
        self.teacher = teacher
        self.teacher.trainable = False
        self.student = student
        self.temperature = float(temperature)
        self.alpha = float(alpha)
        self.token_level = isinstance(student, BertTokenClassifier)
        self.hidden_weight = check_non_negative("hidden_weight", hidden_weight)
        self.attention_weight = check_non_negative("attention_weight", attention_weight)
        self.embedding_weight = check_non_negative("embedding_weight", embedding_weight)
        self.layer_map = layer_map
        self.mapped_layers = resolve_layer_map(layer_map, teacher.backbone.num_layers, student.backbone.num_layers)
        check_transfer(layer_map, self.mapped_layers, self.hidden_weight, self.attention_weight, teacher.backbone,
                       student.backbone)
        self._build_transfer(teacher, student)
        self.compile()

    def _build_transfer(self, teacher, student):
        """The projections (trained, saved with the Distiller) and the two feature models
        (graphs over the teacher's and the student's own layers: nothing of their own)."""
        self._features = None
        self.hidden_projection = None
        self.embedding_projection = None
        self.transfer_trackers = {}
        if not (self.hidden_weight or self.attention_weight or self.embedding_weight):
            return
        teacher_width, student_width = teacher.backbone.hidden_dim, student.backbone.hidden_dim

        if teacher_width != student_width:
            if self.hidden_weight > 0:
                self.hidden_projection = projection("hidden_projection", student_width, teacher_width)
            if self.embedding_weight > 0:
                self.embedding_projection = projection("embedding_projection", student_width, teacher_width)
        wanted = wanted_features(self.hidden_weight, self.attention_weight, self.embedding_weight)
        student_layers = list(range(student.backbone.num_layers))  # every student layer is mapped
        teacher_layers = [m - 1 for m in self.mapped_layers] if self.mapped_layers else []
        # A plain holder, not an attribute Keras tracks: the feature models hold no weights
        # of their own, and saving them would store the teacher's and student's twice.
        self._features = _FeatureModels(
            teacher=_feature_model(teacher, wanted, teacher_layers),
            student=_feature_model(student, wanted, student_layers),
        )
        self.transfer_trackers = {
            name: keras.metrics.Mean(name=name)
            for name, weight in (("hidden_loss", self.hidden_weight), ("attention_loss", self.attention_weight),
                                 ("embedding_loss", self.embedding_weight))
            if weight > 0
        }

    def call(self, inputs, training=False):
        inputs = _model_inputs(inputs)
        if self._features is None:
            return self.student(inputs, training=training)
        # One student forward pass gives the logits and the intermediate tensors.
        return self._features.student(inputs, training=training)

    def predict_step(self, data):
        outputs = super().predict_step(data)
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
        student_features = {key: y_pred[key] for key in FEATURES if key in y_pred}
        y_pred = {key: value for key, value in y_pred.items() if key not in FEATURES}
        teacher_features = None
        if self._features is not None:
            if TEACHER_LOGITS in x:
                raise ValueError(
                    "The inputs carry teacher_logits, but intermediate-layer transfer (layer_map, hidden_weight, "
                    "attention_weight, embedding_weight) needs the teacher's own forward pass on every step, so the "
                    "cached logits would save nothing: drop teacher_logits from the inputs."
                )
            missing = [key for key in self._features.student.output if key not in y_pred and key not in student_features]
            if missing:
                raise ValueError(f"y_pred lacks {missing}: pass the Distiller's own outputs (distiller(x)), which hold "
                                 "the student's intermediate tensors beside its logits.")
            teacher_features = {key: ops.stop_gradient(value)
                                for key, value in self._features.teacher(_model_inputs(x), training=False).items()}
            teacher_logits = teacher_features.pop("logits")
        elif TEACHER_LOGITS in x:
            teacher_logits = ops.cast(x[TEACHER_LOGITS], "float32")  # computed once, beside the transfer set
        else:
            teacher_logits = ops.stop_gradient(self.teacher(_model_inputs(x), training=False)["logits"])  # [B, C] or [B, T, C]
        # Token-level: padded positions carry no teacher signal.
        weight = ops.cast(x["padding_mask"], "float32") if self.token_level else sample_weight
        loss = (1.0 - self.alpha) * self.distillation_loss(teacher_logits, y_pred["logits"], sample_weight=weight)
        if teacher_features is not None:
            scales = {"hidden_loss": self.hidden_weight, "attention_loss": self.attention_weight,
                      "embedding_loss": self.embedding_weight}
            for name, term in self.transfer_terms(student_features, teacher_features, x["padding_mask"]).items():
                loss = loss + scales[name] * term
                # Each replica's term is its share of the global batch's mean (see
                # transfer_terms): times the replica count, the Mean over replicas reports it.
                self.transfer_trackers[name].update_state(term * replicas_in_sync())
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

    def transfer_terms(self, student, teacher, padding_mask):
        """The intermediate-layer terms, unweighted: {"hidden_loss", "attention_loss",
        "embedding_loss"} (those with a weight > 0), from the student's and the teacher's
        feature dicts (`embedding_output` [B, T, H], `hidden_states` [B, K, T, H],
        `attention_probs` [B, K, N, T, T]) and the padding mask [B, T]: each a mean over the
        global batch's real tokens (`transfer_terms.transfer_terms`)."""
        weights = dict(zip(TERMS, (self.hidden_weight, self.attention_weight, self.embedding_weight)))
        return transfer_terms(weights, student, teacher, padding_mask, self.hidden_projection,
                              self.embedding_projection)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        y_pred = {key: value for key, value in y_pred.items() if key not in FEATURES}
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
            "layer_map": self.layer_map,
            "hidden_weight": self.hidden_weight,
            "attention_weight": self.attention_weight,
            "embedding_weight": self.embedding_weight,
        })
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


class _FeatureModels:
    """The teacher's and the student's feature models, out of Keras' attribute tracking."""

    def __init__(self, teacher, student):
        self.teacher = teacher
        self.student = student


def _feature_model(head, wanted, layers):
    """A functional model over `head`'s own layers (weights shared) whose outputs are the
    head's outputs plus the wanted intermediate tensors of its backbone: `embedding_output`
    [B, T, H], `hidden_states` [B, K, T, H] of `layers` (0-based transformer layers: their
    outputs), `attention_probs` [B, K, N, T, T] of the same layers."""
    backbone = head.backbone
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

    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in MODEL_ID_INPUTS}
    # clone_model with the layers themselves (not copies) replays the head's graph on new
    # inputs; only the backbone's call is replaced by its layers' calls. It replays an
    # uncompiled view of the head (same graph, no new nodes): cloning a compiled model
    # also compiles the clone, which for a trained teacher builds a second optimizer state.
    view = keras.Model(head.input, head.output)
    replayed = keras.models.clone_model(view, input_tensors=inputs, clone_function=lambda layer: layer,
                                        call_function=call_function)
    return keras.Model(inputs, {**replayed.output, **features}, name=f"{head.name}_features")


def _model_inputs(inputs):
    """The models' own inputs: the dict without the Distiller's own entries."""
    if isinstance(inputs, dict) and (TEACHER_LOGITS in inputs or LABEL_WEIGHT in inputs):
        return {key: value for key, value in inputs.items() if key not in (TEACHER_LOGITS, LABEL_WEIGHT)}
    return inputs
