"""Distillation: one `Distiller` whose loss is a list of weighted terms (`terms.py`,
`distillation_terms` to choose them), and students made from their teacher
(`student_init.py`: `student_backbone`, `student_model`)."""

from keras_bert_impl.models.distillation.distiller import Distiller
from keras_bert_impl.models.distillation.student_init import (
    backbone_from_layers,
    distillation_teacher,
    embeddings_from_teacher,
    student_backbone,
    student_model,
)
from keras_bert_impl.models.distillation.terms import (
    AttentionTerm,
    DistillationArgumentError,
    DistillationLoss,
    DistillationTerm,
    EmbeddingTerm,
    HiddenStatesTerm,
    LogitsTerm,
    distillation_terms,
)

__all__ = [
    "AttentionTerm",
    "DistillationArgumentError",
    "DistillationLoss",
    "DistillationTerm",
    "Distiller",
    "EmbeddingTerm",
    "HiddenStatesTerm",
    "LogitsTerm",
    "backbone_from_layers",
    "distillation_teacher",
    "distillation_terms",
    "embeddings_from_teacher",
    "student_backbone",
    "student_model",
]
