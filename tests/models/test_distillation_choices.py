"""What `kbert distill` asks of the library, called from Python: the terms chosen from their
settings (`distillation_terms`), the student made from the teacher (`student_backbone`,
`student_model`), the teacher checked (`distillation_teacher`), the transfer set (`TransferSet`)
and a whole run through `distillation_spec`, each refusal naming its argument."""

import json

import numpy as np
import pytest
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl.data import TransferSet
from keras_bert_impl.models import (
    AttentionTerm,
    DistillationArgumentError,
    EmbeddingTerm,
    HiddenStatesTerm,
    LogitsTerm,
    distillation_teacher,
    distillation_terms,
    student_backbone,
    student_model,
)
from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.training import create_optimizer, distillation_spec, run_training
from tests.harness import tiny_backbone_config

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "fine", "film", "dull"]


def _refused(argument, call, *args, **kwargs):
    with pytest.raises(DistillationArgumentError) as refused:
        call(*args, **kwargs)
    assert refused.value.argument == argument, (refused.value.argument, str(refused.value))
    return str(refused.value)


def _teacher(num_layers=2, hidden_dim=8, **head):
    backbone = kb.BertBackbone(
        **tiny_backbone_config(
            vocabulary_size=len(VOCABULARY),
            num_layers=num_layers,
            hidden_dim=hidden_dim,
            intermediate_dim=2 * hidden_dim,
        )
    )
    backbone.set_vocabulary(VOCABULARY, lowercase=True)
    return kb.BertClassifier(backbone, **{"num_classes": 2, "label_names": ["neg", "pos"], **head})


def test_the_terms_follow_their_weights_and_general_distillation_has_no_logits():
    assert [type(t) for t in distillation_terms()] == [LogitsTerm]
    terms = distillation_terms(temperature=3.0, alpha=0.25, attention_weight=0.5, layer_map=[2, 4])
    assert [type(t) for t in terms] == [LogitsTerm, AttentionTerm]
    assert (terms[0].temperature, terms[0].weight, terms[1].layer_map) == (3.0, 0.75, [2, 4])
    general = distillation_terms(logits=False, embedding_weight=0.5)
    assert [type(t) for t in general] == [HiddenStatesTerm, EmbeddingTerm]  # hidden weight 1 by default
    assert (general[0].weight, general[0].layer_map, general[1].weight) == (1.0, "uniform", 0.5)
    assert "all 0" in _refused("hidden_weight", distillation_terms, logits=False, hidden_weight=0.0)
    assert "both 0" in _refused("layer_map", distillation_terms, layer_map="uniform")
    assert "pass layer_map" in _refused("layer_map", distillation_terms, hidden_weight=1.0)
    assert "hidden_weight=-1" in _refused(
        "hidden_weight", distillation_terms, hidden_weight=-1, layer_map=[1]
    )
    assert "temperature=0" in _refused("temperature", distillation_terms, temperature=0)


def test_students_from_a_preset_the_teachers_layers_or_an_encoder():
    teacher = _teacher(num_layers=3, hidden_dim=16).backbone
    # Every preset is wider than this teacher: its embeddings start random, or it is refused.
    assert "wider (hidden_dim 128) than the teacher (16)" in _refused(
        "preset", student_backbone, teacher, "bert_tiny"
    )
    random_student, how = student_backbone(teacher, preset="bert_tiny", embeddings="random")
    assert how == "bert_tiny, random" and random_student.vocabulary == teacher.vocabulary
    layers, how = student_backbone(teacher, layers=[0, 2])
    assert (layers.num_layers, how) == (2, "teacher layers [0, 2]")
    np.testing.assert_array_equal(
        layers.transformer_layers[1].get_weights()[0], teacher.transformer_layers[2].get_weights()[0]
    )
    assert student_backbone(teacher, init=layers) == (layers, "the given encoder")
    assert "increasing order" in _refused("layers", student_backbone, teacher, layers=[2, 0])
    assert "'bert_huge' is not a preset" in _refused("preset", student_backbone, teacher, "bert_huge")
    assert "exactly one" in _refused("preset", student_backbone, teacher, "bert_tiny", [0])
    assert "'random' shapes a preset's" in _refused(
        "embeddings", student_backbone, teacher, layers=[0], embeddings="random"
    )
    other = kb.BertBackbone(**tiny_backbone_config(vocabulary_size=len(VOCABULARY)))
    other.set_vocabulary(VOCABULARY[::-1], lowercase=True)
    assert "another vocabulary than the teacher" in _refused("init", student_backbone, teacher, init=other)


def test_a_preset_narrower_than_the_teacher_starts_from_its_embeddings():
    vocabulary = VOCABULARY + [f"word{i}" for i in range(200)]  # more tokens than the student's width
    teacher = kb.BertBackbone.from_preset(
        "bert_mini", vocabulary_size=len(vocabulary), max_sequence_length=16
    )
    teacher.set_vocabulary(vocabulary, lowercase=True)
    student, how = student_backbone(teacher, preset="bert_tiny")
    assert student.hidden_dim == 128 and how.startswith("bert_tiny, embeddings from the teacher's by PCA (")


def test_the_student_head_is_the_teachers_kind_and_the_unread_pooler_is_frozen():
    teacher = _teacher(num_classes=3, multi_label=True, pooling="mean", label_names=["a", "b", "c"])
    backbone = kb.BertBackbone(**tiny_backbone_config(vocabulary_size=len(VOCABULARY), num_layers=1))
    student = student_model(teacher, backbone, dropout=0.2)
    assert type(student) is kb.BertClassifier and not backbone.pooler.trainable
    assert (
        student.num_classes,
        student.multi_label,
        student.pooling,
        student.label_names,
        student.dropout,
    ) == (3, True, "mean", ["a", "b", "c"], 0.2)
    pooled = kb.BertBackbone(**tiny_backbone_config(vocabulary_size=len(VOCABULARY), num_layers=1))
    assert student_model(_teacher(), pooled).backbone.pooler.trainable  # the head reads it
    assert student_model(teacher.backbone, pooled) is pooled and not pooled.pooler.trainable


def test_the_teacher_is_a_classifier_with_logits_labels_and_a_vocabulary():
    teacher = _teacher()
    assert distillation_teacher(teacher) is teacher
    assert distillation_teacher(kb.QuantizationAwareClassifier(teacher)) is teacher
    assert "Received: probabilities" in _refused(
        "teacher",
        distillation_teacher,
        kb.BertClassifier(teacher.backbone, num_classes=2, activation="softmax"),
    )
    assert "Received: no label names" in _refused(
        "teacher", distillation_teacher, kb.BertClassifier(teacher.backbone, num_classes=2)
    )
    assert "Received: a BertTokenClassifier" in _refused(
        "teacher", distillation_teacher, kb.BertTokenClassifier(teacher.backbone, num_classes=2)
    )


def test_held_out_text_is_the_validation_of_a_general_transfer_set():
    preprocessor = BertPreprocessor(VOCABULARY, sequence_length=8)
    common = dict(teacher=None, preprocessor=preprocessor, batch_size=2, seed=0, epochs=2)
    data = TransferSet(
        **common, unlabeled=["good film", "bad", "dull film"], held_out=["fine", "good"], blank_lines=1
    )
    assert data.describe() == "3 texts (1 blank lines skipped), 2 steps x 2 epochs"
    assert [int(x["token_ids"].shape[0]) for x in data.validation] == [2]
    assert data.facts == {"seq_len": 8, "steps_per_epoch": 2, "length_buckets": False}
    with pytest.raises(ValueError, match="not both"):
        TransferSet(**common, held_out=["fine"], validation=data.validation)


@pytest.mark.slow  # about 20 s or more: a Distiller traced, trained two epochs and scored
def test_a_distillation_spec_trains_a_run_folder_from_python(tmp_path):
    teacher = _teacher()
    preprocessor = BertPreprocessor.from_model(teacher, sequence_length=8)
    rows = (["good film", "bad film", "fine", "dull"], None, [1, 0, 1, 0])
    validation = tf.data.Dataset.from_tensor_slices((preprocessor(["good film", "dull"]), [1, 0])).batch(2)
    data = TransferSet(
        teacher=teacher,
        preprocessor=preprocessor,
        batch_size=2,
        seed=0,
        epochs=2,
        rows=rows,
        unlabeled=["good", "dull film"],
        validation=validation,
        task="classification",
        record={"train": "rows"},
    )

    spec = distillation_spec(
        data=lambda run: data,
        student=lambda encoder: student_backbone(encoder, layers=[1]),
        terms=lambda: distillation_terms(alpha=0.5, hidden_weight=1.0, layer_map=[2]),
        compile=lambda distiller, steps: distiller.compile(
            optimizer=create_optimizer(1e-3, train_steps=steps)
        ),
        facts_file="task.json",
        metrics={"note": "from Python"},
        output=str(tmp_path / "run"),
        settings={"alpha": 0.5},
        command="distill",
        verbose=0,
    )
    assert spec.best(data) == ("val_accuracy", "max")
    result = run_training(spec)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["note"] == "from Python" and len(metrics["history"]["hidden_loss"]) == 2
    assert metrics["parameters"]["student"] == result.model.count_params() < metrics["parameters"]["teacher"]
    assert set(metrics["validation"]) >= {"accuracy"} and set(metrics["teacher_validation"]) >= {"accuracy"}
    task = json.loads((tmp_path / "run" / "task.json").read_text())
    assert task == {
        "alpha": 0.5,
        "train": "rows",
        "task": "classification",
        "pooling": "pooled",
        "label_names": ["neg", "pos"],
        "seq_len": 8,
        "steps_per_epoch": 3,
        "length_buckets": False,
        "layer_map": [2],
    }
    assert type(result.model) is kb.BertClassifier and result.model.backbone.num_layers == 1
