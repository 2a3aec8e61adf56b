"""Students made from their teacher: its own layers (DistilBERT, Sanh et al. 2019: "taking
one layer out of two" of the teacher, same width), or, for a narrower student, its embedding
tables projected onto their principal directions; `student_backbone` picks one of those (or
a preset, or a given encoder), `student_model` puts a head like the teacher's on it, and
`distillation_teacher` checks the classifier a transfer set is read for."""

import numpy as np

from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.distillation.terms import DistillationArgumentError
from keras_bert_impl.models.model_copy import built_with_weights, copy_vocabulary
from keras_bert_impl.models.presets import BERT_PRESETS
from keras_bert_impl.models.quantization_aware_classifier import QuantizationAwareClassifier


def backbone_from_layers(teacher, layers, **overrides):
    """A `BertBackbone` as wide as `teacher` with the encoder layers `layers` (0-based
    indices into the teacher's, in order, e.g. (0, 2, 4, 6, 8, 10) or every k-th), and the
    teacher's embeddings, pooler, vocabulary and casing.

    Args:
        teacher: a `BertBackbone`.
        layers: a non-empty sequence of distinct layer indices in [0, teacher.num_layers),
            increasing.
        overrides: other config fields of the student (e.g. dropout).

    Example:
    >>> teacher = kb.BertBackbone.from_preset("bert_mini")  # 4 layers
    >>> student = backbone_from_layers(teacher, (1, 3))
    >>> student.num_layers, student.hidden_dim
    (2, 256)
    """
    if not isinstance(teacher, BertBackbone):
        raise ValueError(f"teacher must be a BertBackbone. Received: {type(teacher).__name__}")
    layers = list(layers)
    # Increasing: the student's layer k reads what its layer k-1 wrote, as the teacher's do; a
    # reversed or shuffled stack is not a DistilBERT-style student.
    if (
        not layers
        or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < teacher.num_layers for i in layers
        )
        or layers != sorted(set(layers))
    ):
        raise ValueError(
            f"layers must be distinct layer indices in [0, {teacher.num_layers - 1}] of the "
            f"{teacher.num_layers}-layer teacher, in increasing order. Received: layers={layers}"
        )
    config = teacher.get_config()
    config.pop("name", None)
    config.update(num_layers=len(layers), **overrides)

    def set_weights(student):  # every weight of the student: embeddings, the chosen layers, pooler
        student.embeddings.set_weights(teacher.embeddings.get_weights())
        student.pooler.set_weights(teacher.pooler.get_weights())
        for target, source in zip(student.transformer_layers, layers):
            target.set_weights(teacher.transformer_layers[source].get_weights())

    student = built_with_weights(lambda: BertBackbone.from_config(config), set_weights)
    copy_vocabulary(teacher, student)
    return student


def embeddings_from_teacher(teacher, student):
    """Sets a narrower (or as wide) `student`'s token, position and segment embeddings to
    the `teacher`'s projected onto the teacher token table's top `student.hidden_dim`
    principal directions, so that a randomly initialised student starts from the
    teacher's word similarities instead of noise; the student's layers stay random.
    Both are `BertBackbone`s with the same vocabulary size and position embedding kind.

    Returns the fraction of the token table's variance the projection keeps.

    Example:
    >>> teacher = kb.BertBackbone.from_preset("bert_mini")  # H 256
    >>> student = kb.BertBackbone.from_preset("bert_tiny")  # H 128
    >>> 0 < embeddings_from_teacher(teacher, student) <= 1
    True
    """
    for name, model in (("teacher", teacher), ("student", student)):
        if not isinstance(model, BertBackbone):
            raise ValueError(f"{name} must be a BertBackbone. Received: {type(model).__name__}")
    if student.hidden_dim > teacher.hidden_dim or student.vocabulary_size != teacher.vocabulary_size:
        raise ValueError(
            "The student must be at most as wide as the teacher and share its vocabulary. Received: teacher "
            f"hidden_dim={teacher.hidden_dim}, vocabulary_size={teacher.vocabulary_size}; student "
            f"hidden_dim={student.hidden_dim}, vocabulary_size={student.vocabulary_size}"
        )
    source, target = teacher.embeddings, student.embeddings
    tokens = np.asarray(source.token_embedding.embeddings, dtype="float64")  # [V, H_teacher]
    centred = tokens - tokens.mean(axis=0)
    _, singular, directions = np.linalg.svd(centred, full_matrices=False)
    projection = directions[: student.hidden_dim].T  # [H_teacher, H_student]
    # The student's embedding LayerNorm renormalises the sum; the scale only has to be sane:
    # the same standard deviation per dimension as the teacher's table.
    scale = tokens.std() / max(float((centred @ projection).std()), 1e-12)
    target.token_embedding.embeddings.assign((centred @ projection * scale).astype("float32"))
    target.segment_embedding.embeddings.assign(
        (np.asarray(source.segment_embedding.embeddings, "float64") @ projection * scale).astype("float32")
    )
    if (
        getattr(source, "position_embeddings", None) is not None
        and getattr(target, "position_embeddings", None) is not None
    ):
        positions = np.asarray(source.position_embeddings, "float64")[: target.position_embeddings.shape[0]]
        target.position_embeddings.assign((positions @ projection * scale).astype("float32"))
    if student.vocabulary is None and teacher.vocabulary is not None:
        student.set_vocabulary(teacher.vocabulary, teacher.lowercase)
    return float((singular[: student.hidden_dim] ** 2).sum() / (singular**2).sum())


def student_backbone(teacher, preset=None, layers=None, init=None, embeddings="teacher"):
    """A student encoder for the `teacher` encoder (a `BertBackbone` carrying its vocabulary),
    and how it was made, in words for a log line, from exactly one of:

    - `preset`: a `BERT_PRESETS` name with the teacher's vocabulary, its layers random and its
      embedding tables the teacher's projected onto their principal directions
      (`embeddings="teacher"`, `embeddings_from_teacher`) or random (`embeddings="random"`);
    - `layers`: teacher layer indices, a student as wide as the teacher (`backbone_from_layers`);
    - `init`: a `BertBackbone` that tokenizes like the teacher (e.g. a general distillation's
      student), as it is.

    The last two keep the embeddings they have (`embeddings="teacher"`, the default).

    Every refusal is a `DistillationArgumentError` naming the argument.

    Example:
    >>> teacher = kb.BertBackbone.from_preset("bert_mini", vocabulary_size=8)
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "fine"]
    >>> teacher.set_vocabulary(vocabulary, lowercase=True)
    >>> student, how = student_backbone(teacher, preset="bert_tiny", embeddings="random")
    >>> student.num_layers, how
    (2, 'bert_tiny, random')
    """
    given = [
        name for name, value in (("preset", preset), ("layers", layers), ("init", init)) if value is not None
    ]
    if len(given) != 1:
        raise DistillationArgumentError(
            "preset", f"Give exactly one of preset, layers and init. Received: {given or 'none'}"
        )
    if embeddings not in ("teacher", "random") or (embeddings == "random" and preset is None):
        raise DistillationArgumentError(
            "embeddings",
            f"embeddings is 'teacher' or 'random' ('random' shapes a preset's embeddings only). Received: "
            f"embeddings={embeddings!r} with {given[0]}",
        )
    if init is not None:
        return _checked_init(teacher, init), "the given encoder"
    if layers is not None:
        try:
            return backbone_from_layers(teacher, layers), f"teacher layers {list(layers)}"
        except ValueError as e:
            raise DistillationArgumentError("layers", str(e)) from None
    return _preset_student(teacher, preset, embeddings)


def _checked_init(teacher, init):
    if not isinstance(init, BertBackbone):
        raise DistillationArgumentError(
            "init", f"init must be a BertBackbone. Received: {type(init).__name__}"
        )
    if list(init.vocabulary or ()) != list(teacher.vocabulary or ()) or init.lowercase != teacher.lowercase:
        raise DistillationArgumentError(
            "init",
            f"The init encoder tokenizes with another vocabulary than the teacher "
            f"({len(init.vocabulary or ())} vs {len(teacher.vocabulary or ())} tokens, lowercase "
            f"{init.lowercase} vs {teacher.lowercase}): the same ids would mean different tokens. Start "
            "from a student distilled from this teacher's encoder (general distillation).",
        )
    return init


def _preset_student(teacher, preset, embeddings):
    if preset not in BERT_PRESETS:
        raise DistillationArgumentError(
            "preset", f"preset={preset!r} is not a preset. Choose one of: {', '.join(sorted(BERT_PRESETS))}."
        )
    backbone = BertBackbone.from_preset(
        preset, vocabulary_size=teacher.vocabulary_size, max_sequence_length=teacher.max_sequence_length
    )
    backbone.set_vocabulary(teacher.vocabulary, teacher.lowercase)
    if embeddings == "random":
        return backbone, f"{preset}, random"
    if backbone.hidden_dim > teacher.hidden_dim:
        raise DistillationArgumentError(
            "preset",
            f"preset={preset!r} is wider (hidden_dim {backbone.hidden_dim}) than the teacher "
            f"({teacher.hidden_dim}): its embeddings cannot start from the teacher's; pass "
            "embeddings='random' or a narrower preset.",
        )
    kept = embeddings_from_teacher(teacher, backbone)
    return backbone, f"{preset}, embeddings from the teacher's by PCA ({100 * kept:.1f}% of the variance)"


def student_model(teacher, backbone, dropout=0.1):
    """The student of `teacher` on the student encoder `backbone`: a head like the teacher's
    (its kind, classes, label type, pooling and label names, a new output layer with
    `dropout`), or `backbone` itself for a `BertBackbone` teacher (general distillation). The
    pooler is frozen where nothing reads it (no term of an encoder, no mean-pooling head), so
    the optimizer keeps no moments for it; set `backbone.pooler.trainable = True` before
    saving an encoder someone will fine-tune.

    Example:
    >>> teacher = kb.BertClassifier(kb.BertBackbone.from_preset("bert_mini"), num_classes=3)
    >>> student = student_model(teacher, kb.BertBackbone.from_preset("bert_tiny"))
    >>> type(student).__name__, student.num_classes
    ('BertClassifier', 3)
    """
    encoder = isinstance(teacher, BertBackbone)
    if encoder or getattr(teacher, "pooling", None) == "mean":
        backbone.pooler.trainable = False
    if encoder:
        return backbone
    head = dict(num_classes=teacher.num_classes, label_names=teacher.label_names, dropout=dropout)
    if isinstance(teacher, BertClassifier):
        head.update(multi_label=teacher.multi_label, pooling=teacher.pooling)
    return type(teacher)(backbone, **head)


def distillation_teacher(model):
    """The classifier a student learns from when its transfer set is read by the teacher's own
    labels and vocabulary: `model` itself, or the float classifier a `QuantizationAwareClassifier`
    wraps (its fake quantization is there for the integer-only file). Refused, as a
    `DistillationArgumentError` naming "teacher", unless it is a `BertClassifier` with logits
    output, label names and a vocabulary (what `kbert finetune` writes).

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=8)
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "fine"]
    >>> backbone.set_vocabulary(vocabulary, lowercase=True)
    >>> head = kb.BertClassifier(backbone, num_classes=2, label_names=["neg", "pos"])
    >>> distillation_teacher(head) is head
    True
    """
    teacher = model.classifier if isinstance(model, QuantizationAwareClassifier) else model
    missing = (
        f"a {type(teacher).__name__}"
        if not isinstance(teacher, BertClassifier)
        else "probabilities"
        if teacher.activation is not None
        else "no label names"
        if teacher.label_names is None
        else "no vocabulary"
        if teacher.backbone.vocabulary is None
        else None
    )
    if missing:
        raise DistillationArgumentError(
            "teacher",
            "teacher must be a BertClassifier with logits output, label names and a vocabulary (the "
            "model.keras of a kbert finetune run of classification, pair or multilabel). Received: "
            f"{missing}",
        )
    return teacher
