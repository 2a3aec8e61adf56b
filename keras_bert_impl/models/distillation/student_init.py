"""Students initialised from their teacher: its own layers (DistilBERT, Sanh et al. 2019:
"taking one layer out of two" of the teacher, same width), or, for a narrower student, its
embedding tables projected onto their principal directions."""

import numpy as np

from keras_bert_impl.models.bert_backbone import BertBackbone


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
    student = BertBackbone.from_config(config)
    student.embeddings.set_weights(teacher.embeddings.get_weights())
    student.pooler.set_weights(teacher.pooler.get_weights())
    for target, source in zip(student.transformer_layers, layers):
        target.set_weights(teacher.transformer_layers[source].get_weights())
    if teacher.vocabulary is not None:
        student.set_vocabulary(teacher.vocabulary, teacher.lowercase)
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
