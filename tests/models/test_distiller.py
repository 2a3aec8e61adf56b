"""Distiller and DistillationLoss: the loss against a hand computation, training through
model.fit, save/load, and the refusals."""

import numpy as np
import pytest

import keras
from keras_bert_impl.training import inference_copy
from keras_bert_impl.models import BertBackbone, BertClassifier, BertTokenClassifier
from keras_bert_impl.models.distillation_loss import DistillationLoss
from keras_bert_impl.models.distiller import Distiller
from tests.harness import random_inputs, save_and_reload, tiny_backbone_config


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_kl_equals_a_hand_computation_with_the_temperature_squared():
    teacher = np.array([[2.0, 0.5, -1.0], [0.0, 0.0, 3.0]])
    student = np.array([[1.0, 1.0, 0.0], [0.5, -0.5, 1.0]])
    for temperature in (1.0, 2.0, 4.0):
        p, q = _softmax(teacher / temperature), _softmax(student / temperature)
        expected = np.mean(np.sum(p * np.log(p / q), axis=-1)) * temperature ** 2
        got = float(DistillationLoss(temperature)(teacher, student))
        np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert float(DistillationLoss(3.0)(teacher, teacher)) == pytest.approx(0.0, abs=1e-6)


def test_multi_label_kl_is_per_class_bernoulli():
    teacher, student = np.array([[1.5, -2.0]]), np.array([[0.0, 1.0]])
    t = 2.0
    p, q = 1 / (1 + np.exp(-teacher / t)), 1 / (1 + np.exp(-student / t))
    expected = np.sum(p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))) * t ** 2
    np.testing.assert_allclose(float(DistillationLoss(t, multi_label=True)(teacher, student)), expected, rtol=1e-5)


def test_token_level_kl_ignores_padded_positions():
    rng = np.random.default_rng(0)
    teacher, student = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 3))
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], "float32")
    p, q = _softmax(teacher / 2), _softmax(student / 2)
    per_token = np.sum(p * np.log(p / q), axis=-1) * 4  # [2, 4]
    expected = (per_token * mask).sum() / mask.sum()
    np.testing.assert_allclose(float(DistillationLoss(2.0)(teacher, student, sample_weight=mask)), expected, rtol=1e-5)
    garbage = student.copy()
    garbage[mask == 0] = 1e3  # whatever sits at padded positions changes nothing
    np.testing.assert_allclose(float(DistillationLoss(2.0)(teacher, garbage, sample_weight=mask)), expected, rtol=1e-5)


def _pair(num_classes=3, **kwargs):
    teacher = BertClassifier(BertBackbone(**tiny_backbone_config(num_layers=2)), num_classes=num_classes, **kwargs)
    student = BertClassifier(BertBackbone(**tiny_backbone_config(num_layers=1, hidden_dim=16, num_heads=2,
                                                                 intermediate_dim=32)), num_classes=num_classes, **kwargs)
    return teacher, student


def test_fit_moves_the_student_towards_the_frozen_teacher():
    teacher, student = _pair()
    x = random_inputs(batch=16, length=9, seed=1)
    teacher_before = [w.copy() for w in teacher.get_weights()]
    loss = DistillationLoss(2.0)
    gap_before = float(loss(teacher.predict(x, verbose=0)["logits"], student.predict(x, verbose=0)["logits"]))
    distiller = Distiller(teacher, student, temperature=2.0)
    distiller.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = distiller.fit(x, epochs=30, batch_size=8, verbose=0)  # no labels: a transfer set
    gap_after = float(loss(teacher.predict(x, verbose=0)["logits"], student.predict(x, verbose=0)["logits"]))
    assert gap_after < 0.2 * gap_before and list(history.history) == ["loss"]
    for before, after in zip(teacher_before, teacher.get_weights()):
        np.testing.assert_array_equal(before, after)


def test_alpha_mixes_in_the_labels_loss():
    teacher, student = _pair()
    x = random_inputs(batch=4, length=6)
    y = np.array([0, 1, 2, 1])
    distiller = Distiller(teacher, student, temperature=2.0, alpha=0.3)
    y_pred = distiller(x)
    soft = float(DistillationLoss(2.0)(teacher(x)["logits"], y_pred["logits"]))
    hard = float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, y_pred["logits"]))
    np.testing.assert_allclose(float(distiller.compute_loss(x, y, y_pred)), 0.7 * soft + 0.3 * hard, rtol=1e-5)
    with pytest.raises(ValueError, match="has no labels"):
        distiller.compute_loss(x, None, y_pred)


def test_multi_label_and_token_heads_train():
    teacher, student = _pair(num_classes=4, multi_label=True)
    x = random_inputs(batch=8, length=6)
    y = (np.random.default_rng(0).random((8, 4)) > 0.5).astype("float32")
    assert np.isfinite(Distiller(teacher, student, alpha=0.5).fit(x, y, epochs=1, verbose=0).history["loss"][0])
    token_teacher = BertTokenClassifier(BertBackbone(**tiny_backbone_config()), num_classes=5)
    token_student = BertTokenClassifier(BertBackbone(**tiny_backbone_config(num_layers=1)), num_classes=5)
    assert np.isfinite(Distiller(token_teacher, token_student).fit(x, epochs=1, verbose=0).history["loss"][0])


def test_save_and_load_the_distiller_and_the_student(tmp_path):
    teacher, student = _pair()
    distiller = Distiller(teacher, student, temperature=3.0, alpha=0.25)
    x = random_inputs(batch=2, length=5)
    loaded = save_and_reload(distiller)
    assert isinstance(loaded, Distiller) and loaded.temperature == 3.0 and loaded.alpha == 0.25
    np.testing.assert_allclose(loaded(x)["logits"], distiller(x)["logits"], atol=1e-6)
    np.testing.assert_allclose(loaded.teacher(x)["logits"], teacher(x)["logits"], atol=1e-6)
    assert not loaded.teacher.trainable
    path = str(tmp_path / "student.keras")
    distiller.student.save(path)
    np.testing.assert_allclose(keras.saving.load_model(path)(x)["logits"], student(x)["logits"], atol=1e-6)
    # What the run folder's checkpoints save of a Distiller: the student alone.
    copy = inference_copy(distiller)
    assert type(copy) is type(student)
    np.testing.assert_allclose(copy(x)["logits"], student(x)["logits"], atol=1e-6)


def test_refusals():
    teacher, student = _pair()
    with pytest.raises(ValueError, match="temperature must be a number > 0"):
        Distiller(teacher, student, temperature=0)
    with pytest.raises(ValueError, match="alpha"):
        Distiller(teacher, student, alpha=1.5)
    _, other = _pair(num_classes=2)
    with pytest.raises(ValueError, match="same classes"):
        Distiller(teacher, other)
    small_vocab = BertClassifier(BertBackbone(**tiny_backbone_config(vocabulary_size=40)), num_classes=3)
    with pytest.raises(ValueError, match="rows: the same ids would mean different tokens"):
        Distiller(teacher, small_vocab)
    words = [f"w{i}" for i in range(teacher.backbone.vocabulary_size)]
    teacher.backbone.set_vocabulary(words, lowercase=True)
    student.backbone.set_vocabulary(words[:3] + ["other"] + words[4:], lowercase=True)
    with pytest.raises(ValueError, match="vocabularies differ \\(token 3: 'w3' vs 'other'\\)"):
        Distiller(teacher, student)
    with pytest.raises(ValueError, match="same kind of head"):
        Distiller(teacher, BertTokenClassifier(BertBackbone(**tiny_backbone_config()), num_classes=3))
    probabilities = BertClassifier(BertBackbone(**tiny_backbone_config()), num_classes=3, activation="softmax")
    with pytest.raises(ValueError, match="logits output"):
        Distiller(teacher, probabilities)


# A fresh process: logical CPU devices must be set before TensorFlow starts.
MIRRORED_SCRIPT = r"""
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras, numpy as np
import keras_bert_impl as kb
from keras_bert_impl.models.distiller import Distiller
from keras_bert_impl.training import create_strategy

strategy = create_strategy(sys.argv[1])
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = {"token_ids": rng.integers(1, 50, (32, 8)).astype("int32"), "segment_ids": np.zeros((32, 8), "int32"),
     "padding_mask": np.ones((32, 8), "int32")}
y = rng.integers(0, 3, 32)
config = dict(vocabulary_size=50, num_heads=2, max_sequence_length=16, dropout=0.0)
with strategy.scope():
    teacher = kb.BertClassifier(kb.BertBackbone(num_layers=2, hidden_dim=16, intermediate_dim=32, **config), num_classes=3, dropout=0.0)
    student = kb.BertClassifier(kb.BertBackbone(num_layers=1, hidden_dim=8, intermediate_dim=16, **config), num_classes=3, dropout=0.0)
    distiller = Distiller(teacher, student, temperature=2.0, alpha=0.5)
    distiller.compile(optimizer=keras.optimizers.SGD(0.5))
losses = []
class Record(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        losses.append(float(logs["loss"]))
distiller.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8), epochs=1, verbose=0, callbacks=[Record()])
print(json.dumps({"replicas": strategy.num_replicas_in_sync, "losses": losses,
                  "weights": float(sum(np.abs(w).sum() for w in student.get_weights()))}))
"""


def test_mirrored_over_two_cpus_equals_one_device():
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    def run(name):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO, KERAS_BACKEND="tensorflow")
        out = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT, name], capture_output=True, text=True, env=env,
                             timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    one, mirrored = run("one-device"), run("mirrored")
    assert one["replicas"] == 1 and mirrored["replicas"] == 2 and len(one["losses"]) == 4
    np.testing.assert_allclose(mirrored["losses"], one["losses"], rtol=1e-4)
    np.testing.assert_allclose(mirrored["weights"], one["weights"], rtol=1e-5)


def test_student_from_every_other_teacher_layer():
    from keras_bert_impl.models.student_init import backbone_from_layers

    teacher = BertBackbone(**tiny_backbone_config(num_layers=4, dropout=0.0))
    teacher.set_vocabulary([f"w{i}" for i in range(50)], lowercase=True)
    student = backbone_from_layers(teacher, (1, 3))
    x = random_inputs(batch=2, length=6)
    h = teacher.embeddings(x["token_ids"], x["segment_ids"])
    for i in (1, 3):
        h = teacher.transformer_layers[i](h, padding_mask=x["padding_mask"])
    np.testing.assert_allclose(student(x)["sequence_output"], h, atol=1e-6)
    assert student.vocabulary == teacher.vocabulary and student.num_layers == 2
    everything = backbone_from_layers(teacher, range(4))
    np.testing.assert_allclose(everything(x)["pooled_output"], teacher(x)["pooled_output"], atol=1e-6)
    for bad in ((), (4,), (1, 1), (-1,)):
        with pytest.raises(ValueError, match="distinct layer indices in \\[0, 3\\]"):
            backbone_from_layers(teacher, bad)


def test_precomputed_teacher_logits_give_the_loss_and_the_step_of_the_teacher_in_the_step():
    teacher, student = _pair()
    x = random_inputs(batch=8, length=6, seed=3)
    distiller = Distiller(teacher, student, temperature=2.0)
    cached = {**x, "teacher_logits": distiller.teacher_logits(x)}
    np.testing.assert_allclose(cached["teacher_logits"], teacher(x)["logits"], atol=1e-6)
    y_pred = distiller(cached)  # the student ignores the extra input
    np.testing.assert_allclose(y_pred["logits"], student(x)["logits"], atol=1e-6)
    np.testing.assert_allclose(float(distiller.compute_loss(cached, None, y_pred)),
                               float(distiller.compute_loss(x, None, y_pred)), rtol=1e-6)
    # A different teacher signal changes the loss: the cached logits are really used.
    shifted = {**cached, "teacher_logits": cached["teacher_logits"] + np.array([3.0, 0.0, -3.0], "float32")}
    assert float(distiller.compute_loss(shifted, None, y_pred)) > float(distiller.compute_loss(x, None, y_pred)) + 0.1

    # Training: the same steps either way (no dropout, so the two runs can be compared).
    teacher = BertClassifier(BertBackbone(**tiny_backbone_config(dropout=0.0)), num_classes=3, dropout=0.0)
    student = BertClassifier(BertBackbone(**tiny_backbone_config(num_layers=1, dropout=0.0)), num_classes=3, dropout=0.0)
    cached = {**x, "teacher_logits": teacher.predict(x, verbose=0)["logits"]}
    weights = [w.copy() for w in student.get_weights()]
    results = []
    for inputs in (x, cached):
        student.set_weights(weights)
        d = Distiller(teacher, student, temperature=2.0)
        d.compile(optimizer=keras.optimizers.SGD(0.1))
        d.fit(inputs, epochs=2, batch_size=4, shuffle=False, verbose=0)
        results.append([w.copy() for w in student.get_weights()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_student_embeddings_from_the_teachers_principal_directions():
    from keras_bert_impl.models.student_init import embeddings_from_teacher

    teacher = BertBackbone(**tiny_backbone_config(hidden_dim=32, num_heads=2, intermediate_dim=64))
    teacher.set_vocabulary([f"w{i}" for i in range(50)], lowercase=True)
    student = BertBackbone(**tiny_backbone_config(hidden_dim=16, num_heads=2, intermediate_dim=32))
    kept = embeddings_from_teacher(teacher, student)
    tokens = np.asarray(teacher.embeddings.token_embedding.embeddings, "float64")
    centred = tokens - tokens.mean(0)
    # numpy's own PCA: the variance kept and the geometry (pairwise inner products up to one
    # scale) of the token table's best 16-dimensional projection.
    eigenvalues = np.linalg.eigvalsh(centred.T @ centred)[::-1]
    assert kept == pytest.approx(eigenvalues[:16].sum() / eigenvalues.sum(), rel=1e-6)
    projected = np.asarray(student.embeddings.token_embedding.embeddings, "float64")
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    best = centred @ vt[:16].T
    scale = np.linalg.norm(projected) / np.linalg.norm(best)
    np.testing.assert_allclose(projected @ projected.T, scale**2 * (best @ best.T), atol=1e-4)
    assert student.vocabulary == teacher.vocabulary
    with pytest.raises(ValueError, match="at most as wide as the teacher"):
        embeddings_from_teacher(student, teacher)
