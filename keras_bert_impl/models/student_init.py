"""Students initialised from their teacher (DistilBERT, Sanh et al. 2019: "taking one layer
out of two" of the teacher, same width)."""

from keras_bert_impl.models.bert_backbone import BertBackbone


def backbone_from_layers(teacher, layers, **overrides):
    """A `BertBackbone` as wide as `teacher` with the encoder layers `layers` (0-based
    indices into the teacher's, in order, e.g. (0, 2, 4, 6, 8, 10) or every k-th), and the
    teacher's embeddings, pooler, vocabulary and casing.

    Args:
        teacher: a `BertBackbone`.
        layers: a non-empty sequence of distinct layer indices in [0, teacher.num_layers).
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
    if not layers or len(set(layers)) != len(layers) or any(
        isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < teacher.num_layers for i in layers
    ):
        raise ValueError(
            f"layers must be distinct layer indices in [0, {teacher.num_layers - 1}] of the {teacher.num_layers}-layer "
            f"teacher. Received: layers={layers}"
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
