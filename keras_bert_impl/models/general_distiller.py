"""Task-agnostic ("general") distillation, TinyBERT's first stage (Jiao et al. 2020): a
student backbone trained on unlabeled text to reproduce a frozen teacher backbone's
intermediate layers, before any task. The student it leaves is an ordinary `BertBackbone`:
fine-tune it, or start a task distillation from it.

Shape legend: B batch, T tokens, H width, K mapped layers, N heads.
"""

import keras
from keras import ops

from keras_bert_impl.conversion.input_contract import MODEL_ID_INPUTS
from keras_bert_impl.models.bert_backbone import BertBackbone
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
from keras_bert_impl.validation import check_non_negative


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GeneralDistiller(keras.Model):
    """Trains the `student` backbone so that its layers reproduce the frozen `teacher`
    backbone's: the loss is `hidden_weight` * the hidden states' MSE of the mapped layers
    (the student's through a learned projection when it is narrower), plus
    `attention_weight` * the per-head KL of their attention probabilities, plus
    `embedding_weight` * the embedding outputs' MSE; each term averaged over the real
    tokens of the global batch and logged (`hidden_loss`, `attention_loss`,
    `embedding_loss`). There are no labels and no logits: fit on the backbone's input dicts
    alone (the unlabeled text, tokenized).

    Calling it returns the student's intermediate tensors. The projections belong to the
    GeneralDistiller (trained and saved with it, never part of the student); the teacher
    runs frozen in inference mode inside each step.

    Args:
        teacher: a `BertBackbone`, frozen here.
        student: a `BertBackbone` with the teacher's vocabulary (any depth no deeper than
            the layer map allows, any width).
        layer_map: "uniform" (TinyBERT's m(i) = (i + 1) * teacher_layers // student_layers)
            or a list with one teacher hidden-state index in [1, teacher layers] per
            student layer.
        hidden_weight, attention_weight, embedding_weight: floats >= 0, at least one > 0;
            the attention term needs equal head counts.

    Example:
    >>> teacher = kb.BertBackbone.from_preset("bert_mini")  # L4 H256, 4 heads
    >>> student = kb.BertBackbone.from_preset("bert_tiny")  # L2 H128, 2 heads
    >>> general = GeneralDistiller(teacher, student, hidden_weight=1.0, embedding_weight=1.0)
    >>> general.mapped_layers
    [2, 4]
    >>> x = {"token_ids": np.array([[101, 7592, 102]]), "segment_ids": np.zeros((1, 3), "int32"),
    ...      "padding_mask": np.ones((1, 3), "int32")}
    >>> sorted(general.fit(x, epochs=1, verbose=0).history)
    ['embedding_loss', 'hidden_loss', 'loss']
    """

    def __init__(self, teacher, student, layer_map="uniform", hidden_weight=1.0, attention_weight=0.0,
                 embedding_weight=0.0, **kwargs):
        super().__init__(**kwargs)
        for name, model in (("teacher", teacher), ("student", student)):
            if not isinstance(model, BertBackbone):
                raise ValueError(f"{name} must be a BertBackbone (general distillation works on encoders; the task "
                                 f"Distiller takes heads). Received: {type(model).__name__}")
        check_same_vocabulary(teacher, student)
        self.hidden_weight = check_non_negative("hidden_weight", hidden_weight)
        self.attention_weight = check_non_negative("attention_weight", attention_weight)
        self.embedding_weight = check_non_negative("embedding_weight", embedding_weight)
        if not (self.hidden_weight or self.attention_weight or self.embedding_weight):
            raise ValueError("General distillation learns from the teacher's layers only: give hidden_weight, "
                             "attention_weight or embedding_weight a value > 0. Received: all 0.")
        if layer_map is None and (self.hidden_weight or self.attention_weight):
            layer_map = "uniform"
        self.layer_map = layer_map
        self.mapped_layers = resolve_layer_map(layer_map, teacher.num_layers, student.num_layers)
        check_transfer(layer_map, self.mapped_layers, self.hidden_weight, self.attention_weight, teacher, student)
        self.teacher = teacher
        self.teacher.trainable = False
        self.student = student
        wanted = wanted_features(self.hidden_weight, self.attention_weight, self.embedding_weight)
        self.hidden_projection = self.embedding_projection = None
        if teacher.hidden_dim != student.hidden_dim:
            if self.hidden_weight > 0:
                self.hidden_projection = projection("hidden_projection", student.hidden_dim, teacher.hidden_dim)
            if self.embedding_weight > 0:
                self.embedding_projection = projection("embedding_projection", student.hidden_dim, teacher.hidden_dim)
        teacher_layers = [m - 1 for m in self.mapped_layers] if self.mapped_layers else []
        # A plain holder, not attributes Keras tracks: the feature models hold no weights of
        # their own, and saving them would store the teacher's and student's twice.
        self._features = (_feature_model(teacher, wanted, teacher_layers),
                          _feature_model(student, wanted, list(range(student.num_layers))))
        self.trackers = {name: keras.metrics.Mean(name=name) for name, weight in zip(TERMS, self._weights()) if weight > 0}
        self.compile()

    def _weights(self):
        return self.hidden_weight, self.attention_weight, self.embedding_weight

    def compile(self, optimizer="auto", **kwargs):
        """Keras' compile; "auto": Adam at 1e-4 (TinyBERT's general-distillation rate)."""
        auto = isinstance(optimizer, str) and optimizer == "auto"
        super().compile(optimizer=keras.optimizers.Adam(1e-4) if auto else optimizer, **kwargs)

    def call(self, inputs, training=False):
        return self._features[1](_backbone_inputs(inputs), training=training)  # the student's tensors

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        x = _backbone_inputs(x)
        teacher = {key: ops.stop_gradient(value) for key, value in self._features[0](x, training=False).items()}
        weights = dict(zip(TERMS, self._weights()))
        terms = transfer_terms(weights, y_pred, teacher, x["padding_mask"], self.hidden_projection,
                               self.embedding_projection)
        loss = 0.0
        for name, term in terms.items():
            loss = loss + weights[name] * term
            # A replica's term is its share of the global mean: times the replica count, the
            # Mean over replicas reports the global value.
            self.trackers[name].update_state(term * replicas_in_sync())
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return self.get_metrics_result()

    @property
    def inference_model(self):
        """What a checkpoint or export of the GeneralDistiller saves: the student alone."""
        return self.student

    def get_config(self):
        config = super().get_config()
        config.update({
            "teacher": keras.layers.serialize(self.teacher),
            "student": keras.layers.serialize(self.student),
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


def _feature_model(backbone, wanted, layers):
    """A functional model over `backbone`'s own layers (weights shared) whose outputs are the
    wanted intermediate tensors (transfer_terms.select_features)."""
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in MODEL_ID_INPUTS}
    outputs = backbone.layer_outputs(inputs, return_attention_scores=wanted["attention_probs"])
    return keras.Model(inputs, select_features(outputs, wanted, layers), name=f"{backbone.name}_features")


def _backbone_inputs(inputs):
    return {key: inputs[key] for key in MODEL_ID_INPUTS}
