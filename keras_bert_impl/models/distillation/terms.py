"""The `Distiller`'s terms, in the shape of `keras.distillation`'s losses: each term a small
class that owns its weight, what it reads of the two models, its projection, its loss
tracker and its config. Hinton's logits KD (`LogitsTerm`, through `DistillationLoss`) and
TinyBERT's intermediate-layer terms (Jiao et al. 2020): `HiddenStatesTerm`, `AttentionTerm`,
`EmbeddingTerm`, each a mean over the real tokens of the global batch. Every refusal is a
`DistillationArgumentError` naming the argument.

Shape legend: B batch, T tokens, C classes, H width (Hs student, Ht teacher), K mapped
layers, N heads.
"""

import numbers

import keras
from keras import ops

from keras_bert_impl.distillation_defaults import DISTILLATION_DEFAULTS
from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.bert_token_classifier import BertTokenClassifier
from keras_bert_impl.models.masked_sparse_crossentropy import sum_over_replicas
from keras_bert_impl.validation import check_fraction, check_non_negative

# A floor under the attention probabilities before their log: a real key whose probability
# underflowed to 0 in float32 gets log(1e-30) = -69, finite, instead of -inf (0 * -inf = NaN).
_TINY = 1e-30


class DistillationArgumentError(ValueError):
    """A bad argument of the `Distiller` or of one of its terms: a `ValueError` whose
    `argument` field names it, so a caller that knows the argument under another name (the
    `kbert distill` flags) reports it by that field, never by reading the message.

    Args:
        argument: str. "teacher", "student", "terms", "temperature", "alpha", "layer_map", or
            a term's weight named by its kind: "hidden_weight", "attention_weight",
            "embedding_weight".
        message: str. What is wrong, quoting the value, and the fix.

    Attributes:
        models: None, or the two models' depths in words ("a 2-layer student of a 4-layer
            teacher") where the error came from checking the terms against them
            (`distillation_spec` sets it).

    Example:
    >>> DistillationArgumentError("layer_map", "layer_map must be ...").argument
    'layer_map'
    """

    def __init__(self, argument, message):
        super().__init__(message)
        self.argument = argument
        self.models = None


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class DistillationLoss(keras.losses.Loss):
    """KL(teacher || student) of the logits divided by `temperature`, times temperature²
    (so the gradients keep their size as the temperature changes, Hinton et al. 2015).

    Called as `loss(teacher_logits, student_logits, sample_weight=None)`, each [..., C]:
    multi_label=False compares the softmax distributions over the last axis, True each
    class's two Bernoulli (sigmoid) distributions, summed over the classes. The per-row values
    are averaged over `sample_weight` (e.g. a padding mask [B, T]) when given.

    Args:
        temperature: float > 0. 1 compares the plain distributions; 2-4 is usual.
        multi_label: bool. Sigmoid outputs, one decision per class.

    Example:
    >>> float(DistillationLoss(temperature=2.0)(np.array([[2.0, 0.0]]), np.array([[2.0, 0.0]])))
    0.0
    """

    def __init__(self, temperature=2.0, multi_label=False, name="distillation", **kwargs):
        if not _positive_finite(temperature):
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


class DistillationTerm:
    """One weighted term of the `Distiller`'s loss (the base of the four terms below).

    A term is a plain object, built by the one `Distiller` it is given to
    (`build(teacher, student)`: its checks against the models, its projection and tracker,
    which the `Distiller` tracks under its own attributes so they are trained and saved with
    it). `feature` is the entry it reads of both models' outputs, `select` takes it from
    `BertBackbone.layer_outputs`' dict, and calling it gives the unweighted term.
    """

    kind = None  # "logits", "hidden", "attention" or "embedding": one term of each at most
    feature = None

    def __init__(self, weight=1.0):
        self.weight = _argument(f"{self.kind}_weight", check_non_negative, f"{self.kind}_weight", weight)
        self.name = f"{self.kind}_loss"
        self.projection = None
        self.tracker = None
        self.built = False

    def build(self, teacher, student):
        """Checks the term against the two models (heads or backbones) and makes its tracker."""
        self.tracker = keras.metrics.Mean(name=self.name)
        self.built = True

    def select(self, outputs, of_teacher):
        """The term's tensor from `BertBackbone.layer_outputs`' dict of one of the models."""
        raise NotImplementedError

    def get_config(self):
        return {"weight": self.weight}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class LogitsTerm(DistillationTerm):
    """Hinton's KD mixed with the labels' own loss: `(1 - alpha) * T² KL(teacher/T ||
    student/T) + alpha * the student's compiled loss`. Heads only: general distillation
    (two backbones) is the terms without it, with no labels.

    Args:
        temperature: float > 0, the softening of both distributions.
        alpha: float in [0, 1], the weight of the labels' loss; 0 = soft targets only.

    Example:
    >>> LogitsTerm(temperature=3.0, alpha=0.25).weight
    0.75
    """

    kind, feature = "logits", "logits"

    def __init__(self, temperature=DISTILLATION_DEFAULTS.temperature, alpha=DISTILLATION_DEFAULTS.alpha):
        alpha = _argument("alpha", check_fraction, "alpha", alpha, False, False)
        if not _positive_finite(temperature):
            raise DistillationArgumentError(
                "temperature",
                f"temperature must be a finite number > 0 (1 = the plain softmax; "
                f"Hinton et al. use 2 to 20). Received: temperature={temperature!r}",
            )
        super().__init__(1.0 - alpha)
        self.temperature, self.alpha = float(temperature), alpha
        self.loss, self.token_level = None, False

    def build(self, teacher, student):
        # Its value is the loss itself: no tracker of its own.
        if isinstance(student, BertBackbone):
            raise DistillationArgumentError(
                "terms",
                "LogitsTerm compares logits, which backbones have not: general distillation (two "
                "BertBackbones) takes the other terms only.",
            )
        self.loss = DistillationLoss(self.temperature, multi_label=getattr(student, "multi_label", False))
        self.token_level = isinstance(student, BertTokenClassifier)
        self.built = True

    def __call__(self, student, teacher, mask=None, tokens=None, sample_weight=None):
        """KD of the logits [B, C] or [B, T, C], `sample_weight` per row or token."""
        return self.loss(teacher, student, sample_weight=sample_weight)

    def get_config(self):
        return {"temperature": self.temperature, "alpha": self.alpha}


class _MappedTerm(DistillationTerm):
    """A term over mapped layer pairs: student layer i against the teacher's hidden state
    `mapped_layers[i]` (1-based; 0 is the embedding output)."""

    def __init__(self, weight=1.0, layer_map=DISTILLATION_DEFAULTS.general_layer_map):
        super().__init__(weight)
        self.layer_map = list(layer_map) if isinstance(layer_map, (list, tuple)) else layer_map
        self.mapped_layers = None
        self._student_layers = None

    def build(self, teacher, student):
        super().build(teacher, student)
        teacher, student = _backbone(teacher), _backbone(student)
        self.mapped_layers = resolve_layer_map(self.layer_map, teacher.num_layers, student.num_layers)
        self._student_layers = student.num_layers

    def _layers(self, of_teacher):
        """Indices into the hidden states (1-based: a layer's output) of the compared layers."""
        return self.mapped_layers if of_teacher else list(range(1, self._student_layers + 1))

    def get_config(self):
        return {"weight": self.weight, "layer_map": self.layer_map}


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class HiddenStatesTerm(_MappedTerm):
    """TinyBERT's hidden-state term: the mean squared error between student layer i's output
    and the teacher's hidden state `layer_map[i]`, the student's states through a learned
    `Dense(teacher width, use_bias=False)` (W_h) when the widths differ, averaged over the
    mapped layers, the width and the real tokens.

    Args:
        weight: float >= 0.
        layer_map: "uniform" (TinyBERT's m(i) = (i + 1) * teacher_layers // student_layers) or
            a list with one teacher hidden-state index in [1, teacher layers] per student layer.

    Example:
    >>> term = HiddenStatesTerm(0.5, layer_map=[2, 4])
    >>> term.name, term.get_config()
    ('hidden_loss', {'weight': 0.5, 'layer_map': [2, 4]})
    """

    kind, feature = "hidden", "hidden_states"

    def build(self, teacher, student):
        super().build(teacher, student)
        self.projection = _projection("hidden_projection", _backbone(student), _backbone(teacher))

    def select(self, outputs, of_teacher):
        return ops.stack([outputs["hidden_states"][i] for i in self._layers(of_teacher)], axis=1)

    def __call__(self, student, teacher, mask, tokens):
        """[B, K, Hs] and [B, K, T, Ht] states; `mask` [B, T] float, `tokens` the global
        batch's real token count (`real_tokens`)."""
        if self.projection is not None:
            student = self.projection(student)  # [.., Hs] -> [.., Ht]
        return masked_mse(student, teacher, mask, tokens)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class AttentionTerm(_MappedTerm):
    """TinyBERT's attention term: KL(teacher || student) of each head's attention
    probabilities over the keys, for the mapped layer pairs, averaged over the layers, heads
    and real query tokens (padded keys carry no probability and are left out). The two
    models need the same number of heads. Args as `HiddenStatesTerm`'s.

    Example:
    >>> AttentionTerm(1.0).name
    'attention_loss'
    """

    kind, feature = "attention", "attention_probs"

    def build(self, teacher, student):
        super().build(teacher, student)
        teacher, student = _backbone(teacher), _backbone(student)
        if teacher.num_heads != student.num_heads:
            raise DistillationArgumentError(
                "attention_weight",
                f"attention_weight={self.weight} compares attention head by head, but the teacher has "
                f"{teacher.num_heads} heads and the student {student.num_heads}. Pass attention_weight=0 "
                "(MiniLM's head-count-free transfer of the last layer's value relations is not available "
                f"here), or a student with {teacher.num_heads} heads.",
            )

    def select(self, outputs, of_teacher):
        probs = outputs["attention_probs"]
        return ops.stack([probs[i - 1] for i in self._layers(of_teacher)], axis=1)

    def __call__(self, student, teacher, mask, tokens):
        """[B, K, N, T, T] probabilities of each; `mask`, `tokens` as `HiddenStatesTerm`'s."""
        return masked_attention_kl(teacher, student, mask, tokens)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class EmbeddingTerm(DistillationTerm):
    """TinyBERT's embedding term: the mean squared error between the embedding outputs
    (hidden state 0), the student's through a projection of its own (W_e) when the widths
    differ, averaged over the width and the real tokens.

    Args:
        weight: float >= 0.

    Example:
    >>> EmbeddingTerm(0.25).get_config()
    {'weight': 0.25}
    """

    kind, feature = "embedding", "embedding_output"

    def build(self, teacher, student):
        super().build(teacher, student)
        self.projection = _projection("embedding_projection", _backbone(student), _backbone(teacher))

    def select(self, outputs, of_teacher):
        return outputs["hidden_states"][0]

    def __call__(self, student, teacher, mask, tokens):
        if self.projection is not None:
            student = self.projection(student)
        # One "layer" each: [B, 1, T, H].
        return masked_mse(ops.expand_dims(student, 1), ops.expand_dims(teacher, 1), mask, tokens)


def resolve_layer_map(layer_map, teacher_layers, student_layers):
    """`layer_map` as a list of teacher hidden-state indices, one per student layer.
    "uniform" is TinyBERT's m(i) = (i + 1) * teacher_layers // student_layers.

    Example:
    >>> resolve_layer_map("uniform", 6, 2)
    [3, 6]
    """

    def refuse(message):
        raise DistillationArgumentError("layer_map", message)

    shape = f"layer_map must be 'uniform' or a list of teacher layers. Received: layer_map={layer_map!r}"
    if isinstance(layer_map, str):
        if layer_map != "uniform":
            refuse(shape)
        mapped = [(i + 1) * teacher_layers // student_layers for i in range(student_layers)]
        if mapped[0] < 1:
            refuse(
                f"layer_map='uniform' needs a student no deeper than the teacher. Received: "
                f"{student_layers} student layers, {teacher_layers} teacher layers."
            )
        return mapped
    if not isinstance(layer_map, (list, tuple)):
        refuse(shape)
    mapped = list(layer_map)
    if len(mapped) != student_layers:
        refuse(
            f"layer_map must give one teacher layer per student layer ({student_layers}). Received "
            f"{len(mapped)}: layer_map={mapped!r}"
        )
    for i, value in enumerate(mapped):
        if (
            not isinstance(value, numbers.Integral)
            or isinstance(value, bool)
            or not 1 <= value <= teacher_layers
        ):
            refuse(
                f"layer_map[{i}] must be a teacher layer in [1, {teacher_layers}] (hidden state 0, the "
                f"embedding output, is matched by an EmbeddingTerm). Received: layer_map[{i}]={value!r} in "
                f"layer_map={mapped!r}"
            )
    return [int(value) for value in mapped]


def real_tokens(padding_mask):
    """The padding mask [B, T] as float32 and the count of real tokens in the global batch,
    the denominator of every intermediate term. Under a tf.distribute strategy a replica
    divides its sum by the token count summed over every replica, so the replicas' values
    add up to the one-device value (MaskedSparseCrossentropy's rule) whatever their share
    of padding."""
    mask = ops.cast(padding_mask, "float32")  # [B, T]
    return mask, sum_over_replicas(ops.sum(mask))


def masked_mse(student, teacher, mask, tokens):
    """Squared error of [B, K, T, H] states averaged over the width, the K layers and the
    real tokens (mask [B, T]; `tokens` their count in the global batch)."""
    error = ops.mean(
        ops.square(ops.cast(student, "float32") - ops.cast(teacher, "float32")), axis=-1
    )  # [B, K, T]
    layers = ops.cast(ops.shape(error)[1], "float32")
    return ops.divide_no_nan(ops.sum(error * ops.expand_dims(mask, 1)), tokens * layers)


def masked_attention_kl(teacher, student, mask, tokens):
    """KL(teacher || student) over the keys of [B, K, N, T, T] attention probabilities,
    averaged over the K layers, the N heads and the real query tokens; padded keys (mask
    [B, T]) left out."""
    p = ops.cast(teacher, "float32")
    log_ratio = ops.log(ops.maximum(p, _TINY)) - ops.log(ops.maximum(ops.cast(student, "float32"), _TINY))
    keys = ops.expand_dims(ops.expand_dims(ops.expand_dims(mask, 1), 1), 1)  # [B, 1, 1, 1, T]
    kl = ops.sum(p * log_ratio * keys, axis=-1)  # [B, K, N, T]
    queries = ops.expand_dims(ops.expand_dims(mask, 1), 1)  # [B, 1, 1, T]
    layers_heads = ops.cast(ops.shape(kl)[1] * ops.shape(kl)[2], "float32")
    return ops.divide_no_nan(ops.sum(kl * queries), tokens * layers_heads)


def _backbone(model):
    return model if isinstance(model, BertBackbone) else model.backbone


def _projection(name, student, teacher):
    """TinyBERT's W: a student state [.., Hs] -> [.., Ht], float32 like the teacher's states
    it is compared with (under mixed precision too); None when the widths agree."""
    if student.hidden_dim == teacher.hidden_dim:
        return None
    layer = keras.layers.Dense(teacher.hidden_dim, use_bias=False, dtype="float32", name=name)
    layer.build((None, None, student.hidden_dim))
    return layer


def _positive_finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")


def _argument(argument, check, *args):
    """`check(*args)`, its ValueError raised as a DistillationArgumentError naming `argument`."""
    try:
        return check(*args)
    except ValueError as e:
        raise DistillationArgumentError(argument, str(e)) from None


def distillation_terms(
    logits=True,
    temperature=DISTILLATION_DEFAULTS.temperature,
    alpha=DISTILLATION_DEFAULTS.alpha,
    hidden_weight=None,
    attention_weight=0.0,
    embedding_weight=0.0,
    layer_map=None,
):
    """The `Distiller`'s terms from their settings: a `LogitsTerm` when `logits` (task
    distillation; general distillation has none), and each intermediate term whose weight is
    > 0 (`hidden_weight` None: 0 beside logits, else `DISTILLATION_DEFAULTS.general_hidden_weight`).
    A new list each call (a `Distiller` builds its own terms).

    `layer_map` (see `HiddenStatesTerm`) is for the hidden-state and attention terms: refused
    when both weights are 0, and needed by them, but in general distillation (no logits),
    which maps uniformly when it is None (`DISTILLATION_DEFAULTS.general_layer_map`) and needs
    a term whose weight is > 0. Every refusal is a `DistillationArgumentError`.

    Example:
    >>> [term.name for term in distillation_terms(hidden_weight=1.0, layer_map="uniform")]
    ['logits_loss', 'hidden_loss']
    >>> [term.get_config() for term in distillation_terms(logits=False, embedding_weight=0.5)]
    [{'weight': 1.0, 'layer_map': 'uniform'}, {'weight': 0.5}]
    """
    if hidden_weight is None:
        hidden_weight = 0.0 if logits else DISTILLATION_DEFAULTS.general_hidden_weight
    mapping = DISTILLATION_DEFAULTS.general_layer_map if layer_map is None else layer_map
    wanted = [
        (LogitsTerm, dict(temperature=temperature, alpha=alpha), logits),
        (HiddenStatesTerm, dict(weight=hidden_weight, layer_map=mapping), hidden_weight),
        (AttentionTerm, dict(weight=attention_weight, layer_map=mapping), attention_weight),
        (EmbeddingTerm, dict(weight=embedding_weight), embedding_weight),
    ]
    terms = [term(**arguments) for term, arguments, on in wanted if on]
    mapped = [term for term in terms if isinstance(term, _MappedTerm)]
    if not logits and not terms:
        raise DistillationArgumentError(
            "hidden_weight",
            "General distillation learns from the teacher's layers only: give hidden_weight, "
            "attention_weight or embedding_weight a value > 0. Received: all 0.",
        )
    if layer_map is not None and not mapped:
        raise DistillationArgumentError(
            "layer_map",
            f"layer_map={layer_map!r} maps layers for hidden_weight and attention_weight, which are both "
            "0: give one of them a weight > 0, or drop layer_map.",
        )
    if layer_map is None and mapped and logits:
        raise DistillationArgumentError(
            "layer_map",
            f"hidden_weight={hidden_weight} and attention_weight={attention_weight} compare mapped layers: "
            "pass layer_map (a teacher layer per student layer, or 'uniform').",
        )
    return terms
