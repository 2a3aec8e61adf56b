"""GeneralDistiller (task-agnostic distillation of a student backbone): its loss against a
hand computation on the layers called one by one, training through fit, save/load, and
the refusals."""

import numpy as np
import pytest

import keras
from keras_bert_impl.models import BertBackbone, GeneralDistiller
from keras_bert_impl.training import inference_copy
from tests.harness import random_inputs, save_and_reload, tiny_backbone_config
from tests.models.test_distiller import _deep_pair, _padded_inputs, _states


def _backbones(**kwargs):
    teacher, student = _deep_pair(**kwargs)
    return teacher.backbone, student.backbone


def test_loss_equals_a_hand_computation_with_padding_and_the_projections():
    teacher, student = _backbones()
    general = GeneralDistiller(teacher, student, layer_map=[2, 4], hidden_weight=0.7, attention_weight=2.0,
                               embedding_weight=0.3)
    x = _padded_inputs()
    mask = x["padding_mask"].astype("float64")
    t_hidden, t_probs = _states(teacher, x)
    s_hidden, s_probs = _states(student, x)
    w_h = np.asarray(general.hidden_projection.kernel, "float64")  # [8, 16]
    w_e = np.asarray(general.embedding_projection.kernel, "float64")

    def mse(s, t):
        return ((s - t) ** 2).mean(-1)[mask == 1].sum()

    hidden = sum(mse(s_hidden[i + 1] @ w_h, t_hidden[m]) for i, m in enumerate([2, 4])) / (2 * mask.sum())
    embedding = mse(s_hidden[0] @ w_e, t_hidden[0]) / mask.sum()
    kl = 0.0
    for i, m in enumerate([2, 4]):
        p, q = t_probs[m - 1], s_probs[i]
        keys = mask[:, None, None, :] == 1
        per_query = np.where(keys, p * np.log(np.where(keys, p, 1) / np.where(keys, q, 1)), 0).sum(-1)
        kl += (per_query * mask[:, None, :]).sum()
    attention = kl / (2 * 2 * mask.sum())
    assert hidden > 0.01 and attention > 0.01 and embedding > 0.01

    total = float(general.compute_loss(x, None, general(x)))
    np.testing.assert_allclose(total, 0.7 * hidden + 2.0 * attention + 0.3 * embedding, rtol=1e-5)
    # Padded positions count for nothing.
    garbage = dict(x, token_ids=np.where(x["padding_mask"] == 1, x["token_ids"], 17).astype("int32"))
    np.testing.assert_allclose(float(general.compute_loss(garbage, None, general(garbage))), total, rtol=1e-5)


def test_fit_pulls_the_student_towards_the_teacher_and_leaves_the_teacher_alone():
    teacher, student = _backbones()
    general = GeneralDistiller(teacher, student, hidden_weight=1.0, attention_weight=1.0, embedding_weight=1.0)
    assert general.mapped_layers == [2, 4]  # TinyBERT's uniform map is the default
    general.compile(optimizer=keras.optimizers.Adam(1e-2))
    teacher_weights = [w.copy() for w in teacher.get_weights()]
    x = random_inputs(batch=16, length=9, seed=2)
    history = general.fit(x, epochs=8, batch_size=8, verbose=0).history
    assert sorted(history) == ["attention_loss", "embedding_loss", "hidden_loss", "loss"]
    assert history["hidden_loss"][-1] < 0.5 * history["hidden_loss"][0], history["hidden_loss"]
    assert history["embedding_loss"][-1] < 0.6 * history["embedding_loss"][0], history["embedding_loss"]
    for before, after in zip(teacher_weights, teacher.get_weights()):
        np.testing.assert_array_equal(before, after)
    evaluated = general.evaluate(x, batch_size=16, verbose=0, return_dict=True)
    np.testing.assert_allclose(evaluated["loss"], float(general.compute_loss(x, None, general(x))), rtol=1e-5)


def test_save_and_load_the_general_distiller_and_the_student():
    teacher, student = _backbones()
    general = GeneralDistiller(teacher, student, hidden_weight=1.0, embedding_weight=0.5)
    general.hidden_projection.kernel.assign(np.random.default_rng(0).normal(size=(8, 16)).astype("float32"))
    x = _padded_inputs()
    loss = float(general.compute_loss(x, None, general(x)))
    loaded = save_and_reload(general)
    assert isinstance(loaded, GeneralDistiller) and loaded.mapped_layers == [2, 4] and loaded.embedding_weight == 0.5
    np.testing.assert_array_equal(loaded.hidden_projection.kernel, general.hidden_projection.kernel)
    np.testing.assert_allclose(float(loaded.compute_loss(x, None, loaded(x))), loss, rtol=1e-6)
    # What a checkpoint of it saves is the student backbone alone, which reloads as one.
    copy = save_and_reload(inference_copy(general))
    assert type(copy) is BertBackbone and len(copy.weights) == len(student.weights)
    np.testing.assert_allclose(copy(x)["sequence_output"], student(x)["sequence_output"], atol=1e-6)


def test_refusals_quote_the_bad_value():
    teacher, student = _backbones()
    with pytest.raises(ValueError, match="teacher must be a BertBackbone.*Received: BertClassifier"):
        GeneralDistiller(_deep_pair()[0], student)
    with pytest.raises(ValueError, match="give hidden_weight, attention_weight or embedding_weight a value > 0"):
        GeneralDistiller(teacher, student, hidden_weight=0.0)
    with pytest.raises(ValueError, match=r"Received: layer_map\[1\]=5 in layer_map=\[2, 5\]"):
        GeneralDistiller(teacher, student, layer_map=[2, 5])
    with pytest.raises(ValueError, match="teacher has 2 heads and the student 1"):
        GeneralDistiller(teacher, BertBackbone(**tiny_backbone_config(num_heads=1)), attention_weight=1.0)
    with pytest.raises(ValueError, match="token embeddings have 50 and 60 rows"):
        GeneralDistiller(teacher, BertBackbone(**tiny_backbone_config(vocabulary_size=60)))
    with pytest.raises(ValueError, match="hidden_weight must be a number >= 0. Received: hidden_weight=-1.0"):
        GeneralDistiller(teacher, student, hidden_weight=-1.0)
