"""Distillation: one `Distiller` whose loss is a list of weighted terms (`terms.py`), and
students initialised from their teacher (`student_init.py`)."""

from keras_bert_impl.models.distillation.distiller import Distiller
from keras_bert_impl.models.distillation.student_init import backbone_from_layers, embeddings_from_teacher
from keras_bert_impl.models.distillation.terms import (
    AttentionTerm,
    DistillationArgumentError,
    DistillationLoss,
    DistillationTerm,
    EmbeddingTerm,
    HiddenStatesTerm,
    LogitsTerm,
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
    "embeddings_from_teacher",
]
