"""Distiller and DistillationLoss: the loss against a hand computation, training through
model.fit, save/load, and the refusals."""

import numpy as np
import pytest

import keras
from keras_bert_impl.training import inference_copy
from keras_bert_impl.models import BertBackbone, BertClassifier, BertTokenClassifier
from keras_bert_impl.models.distillation import (
    AttentionTerm,
    DistillationLoss,
    Distiller,
    EmbeddingTerm,
    HiddenStatesTerm,
    LogitsTerm,
)
from tests.harness import random_inputs, save_and_reload, tiny_backbone_config


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_kl_equals_a_hand_computation_with_the_temperature_squared():
    teacher = np.array([[2.0, 0.5, -1.0], [0.0, 0.0, 3.0]])
    student = np.array([[1.0, 1.0, 0.0], [0.5, -0.5, 1.0]])
    for temperature in (1.0, 2.0, 4.0):
        p, q = _softmax(teacher / temperature), _softmax(student / temperature)
        expected = np.mean(np.sum(p * np.log(p / q), axis=-1)) * temperature**2
        got = float(DistillationLoss(temperature)(teacher, student))
        np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert float(DistillationLoss(3.0)(teacher, teacher)) == pytest.approx(0.0, abs=1e-6)


def test_multi_label_kl_is_per_class_bernoulli():
    teacher, student = np.array([[1.5, -2.0]]), np.array([[0.0, 1.0]])
    t = 2.0
    p, q = 1 / (1 + np.exp(-teacher / t)), 1 / (1 + np.exp(-student / t))
    expected = np.sum(p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))) * t**2
    np.testing.assert_allclose(
        float(DistillationLoss(t, multi_label=True)(teacher, student)), expected, rtol=1e-5
    )


def test_token_level_kl_ignores_padded_positions():
    rng = np.random.default_rng(0)
    teacher, student = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 3))
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], "float32")
    p, q = _softmax(teacher / 2), _softmax(student / 2)
    per_token = np.sum(p * np.log(p / q), axis=-1) * 4  # [2, 4]
    expected = (per_token * mask).sum() / mask.sum()
    np.testing.assert_allclose(
        float(DistillationLoss(2.0)(teacher, student, sample_weight=mask)), expected, rtol=1e-5
    )
    garbage = student.copy()
    garbage[mask == 0] = 1e3  # whatever sits at padded positions changes nothing
    np.testing.assert_allclose(
        float(DistillationLoss(2.0)(teacher, garbage, sample_weight=mask)), expected, rtol=1e-5
    )


def _pair(num_classes=3, **kwargs):
    teacher = BertClassifier(
        BertBackbone(**tiny_backbone_config(num_layers=2)), num_classes=num_classes, **kwargs
    )
    student = BertClassifier(
        BertBackbone(**tiny_backbone_config(num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32)),
        num_classes=num_classes,
        **kwargs,
    )
    return teacher, student


@pytest.mark.slow  # about 20 s or more: trains a student with fit
def test_fit_moves_the_student_towards_the_frozen_teacher():
    teacher, student = _pair()
    x = random_inputs(batch=16, length=9, seed=1)
    teacher_before = [w.copy() for w in teacher.get_weights()]
    loss = DistillationLoss(2.0)
    gap_before = float(loss(teacher.predict(x, verbose=0)["logits"], student.predict(x, verbose=0)["logits"]))
    distiller = Distiller(teacher, student, [LogitsTerm(2.0)])
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
    distiller = Distiller(teacher, student, [LogitsTerm(2.0, alpha=0.3)])
    y_pred = distiller(x)
    soft = float(DistillationLoss(2.0)(teacher(x)["logits"], y_pred["logits"]))
    hard = float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, y_pred["logits"]))
    np.testing.assert_allclose(
        float(distiller.compute_loss(x, y, y_pred)), 0.7 * soft + 0.3 * hard, rtol=1e-5
    )
    with pytest.raises(ValueError, match="has no labels"):
        distiller.compute_loss(x, None, y_pred)


@pytest.mark.slow  # about 20 s or more: trains two students with fit
def test_multi_label_and_token_heads_train():
    teacher, student = _pair(num_classes=4, multi_label=True)
    x = random_inputs(batch=8, length=6)
    y = (np.random.default_rng(0).random((8, 4)) > 0.5).astype("float32")
    assert np.isfinite(
        Distiller(teacher, student, [LogitsTerm(alpha=0.5)]).fit(x, y, epochs=1, verbose=0).history["loss"][0]
    )
    token_teacher = BertTokenClassifier(BertBackbone(**tiny_backbone_config()), num_classes=5)
    token_student = BertTokenClassifier(BertBackbone(**tiny_backbone_config(num_layers=1)), num_classes=5)
    assert np.isfinite(Distiller(token_teacher, token_student).fit(x, epochs=1, verbose=0).history["loss"][0])


def test_save_and_load_the_distiller_and_the_student(tmp_path):
    teacher, student = _pair()
    distiller = Distiller(teacher, student, [LogitsTerm(3.0, alpha=0.25)])
    x = random_inputs(batch=2, length=5)
    loaded = save_and_reload(distiller)
    assert isinstance(loaded, Distiller) and loaded.logits_term.get_config() == {
        "temperature": 3.0,
        "alpha": 0.25,
    }
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
    for temperature in (0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
            Distiller(teacher, student, [LogitsTerm(temperature)])
    with pytest.raises(ValueError, match="alpha"):
        Distiller(teacher, student, [LogitsTerm(alpha=1.5)])
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
    probabilities = BertClassifier(
        BertBackbone(**tiny_backbone_config()), num_classes=3, activation="softmax"
    )
    with pytest.raises(ValueError, match="logits output"):
        Distiller(teacher, probabilities)


# A fresh process: logical CPU devices must be set before TensorFlow starts. One process runs
# all four trainings (each from the same seeds, on one strategy object of each kind: a second
# MirroredStrategy in a process reuses the first one's collective keys): a process start and its
# TensorFlow import cost more than a training here.
MIRRORED_SCRIPT = r"""
import json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras, numpy as np
import keras_bert_impl as kb
from keras_bert_impl.models.distillation import Distiller
from keras_bert_impl.training import create_strategy

strategies = {name: create_strategy(name) for name in ("one-device", "mirrored")}

def train(name, mode):
    strategy = strategies[name]
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(1, 50, (32, 8)).astype("int32"), "segment_ids": np.zeros((32, 8), "int32"),
         "padding_mask": np.ones((32, 8), "int32")}
    y = rng.integers(0, 3, 32)
    transfer = []
    if mode == "transfer":
        # Replicas with different numbers of real tokens: the terms' means are over the global batch.
        x["padding_mask"][np.arange(32) % 8 < 4, 5:] = 0
        x["token_ids"] *= x["padding_mask"]
        transfer = [kb.HiddenStatesTerm(1.0), kb.AttentionTerm(1.0), kb.EmbeddingTerm(0.5)]
    config = dict(vocabulary_size=50, num_heads=2, max_sequence_length=16, dropout=0.0)
    with strategy.scope():
        teacher_backbone = kb.BertBackbone(num_layers=2, hidden_dim=16, intermediate_dim=32, **config)
        teacher = kb.BertClassifier(teacher_backbone, num_classes=3, dropout=0.0)
        student_backbone = kb.BertBackbone(num_layers=1, hidden_dim=8, intermediate_dim=16, **config)
        student = kb.BertClassifier(student_backbone, num_classes=3, dropout=0.0)
        distiller = Distiller(teacher, student, [kb.LogitsTerm(2.0, alpha=0.5), *transfer])
        distiller.compile(optimizer=keras.optimizers.SGD(0.5))
    losses = []
    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(float(logs["loss"]))
    history = distiller.fit(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(8), epochs=1, verbose=0, callbacks=[Record()]
    )
    projection = distiller.hidden_projection.kernel.numpy() if transfer else np.zeros(1)
    return {"replicas": strategy.num_replicas_in_sync, "losses": losses,
            "logs": {k: v[-1] for k, v in history.history.items()},
            "weights": float(sum(np.abs(w).sum() for w in student.get_weights())),
            "projection": float(np.abs(projection).sum())}

print(json.dumps({mode: {name: train(name, mode) for name in ("one-device", "mirrored")}
                  for mode in ("logits", "transfer")}))
"""


@pytest.fixture(scope="module")
def mirrored_runs():
    """{"logits" | "transfer": {"one-device" | "mirrored": the run's results}}, from one child."""
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO, KERAS_BACKEND="tensorflow")
    out = subprocess.run(
        [sys.executable, "-c", MIRRORED_SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("transfer", ["logits", "transfer"])
@pytest.mark.slow  # about 20 s or more: trains on one and on two devices
def test_mirrored_over_two_cpus_equals_one_device(mirrored_runs, transfer):
    one, mirrored = mirrored_runs[transfer]["one-device"], mirrored_runs[transfer]["mirrored"]
    assert one["replicas"] == 1 and mirrored["replicas"] == 2 and len(one["losses"]) == 4
    np.testing.assert_allclose(mirrored["losses"], one["losses"], rtol=1e-4)
    np.testing.assert_allclose(mirrored["weights"], one["weights"], rtol=1e-5)
    np.testing.assert_allclose(mirrored["projection"], one["projection"], rtol=1e-5)
    if transfer == "transfer":
        assert sorted(one["logs"]) == ["accuracy", "attention_loss", "embedding_loss", "hidden_loss", "loss"]
        for key, value in one["logs"].items():
            np.testing.assert_allclose(mirrored["logs"][key], value, rtol=1e-4, err_msg=key)


def test_student_from_every_other_teacher_layer():
    from keras_bert_impl.models.distillation.student_init import backbone_from_layers

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
    for bad in ((), (4,), (1, 1), (-1,), (1, 0)):
        with pytest.raises(
            ValueError, match="distinct layer indices in \\[0, 3\\] of the 4-layer teacher, in increasing"
        ):
            backbone_from_layers(teacher, bad)


def test_precomputed_teacher_logits_give_the_loss_and_the_step_of_the_teacher_in_the_step():
    teacher, student = _pair()
    x = random_inputs(batch=8, length=6, seed=3)
    distiller = Distiller(teacher, student, [LogitsTerm(2.0)])
    cached = {**x, "teacher_logits": distiller.teacher_logits(x)}
    np.testing.assert_allclose(cached["teacher_logits"], teacher(x)["logits"], atol=1e-6)
    y_pred = distiller(cached)  # the student ignores the extra input
    np.testing.assert_allclose(y_pred["logits"], student(x)["logits"], atol=1e-6)
    np.testing.assert_allclose(
        float(distiller.compute_loss(cached, None, y_pred)),
        float(distiller.compute_loss(x, None, y_pred)),
        rtol=1e-6,
    )
    # A different teacher signal changes the loss: the cached logits are really used.
    shifted = {**cached, "teacher_logits": cached["teacher_logits"] + np.array([3.0, 0.0, -3.0], "float32")}
    assert (
        float(distiller.compute_loss(shifted, None, y_pred))
        > float(distiller.compute_loss(x, None, y_pred)) + 0.1
    )

    # Training: the same steps either way (no dropout, so the two runs can be compared).
    teacher = BertClassifier(BertBackbone(**tiny_backbone_config(dropout=0.0)), num_classes=3, dropout=0.0)
    student = BertClassifier(
        BertBackbone(**tiny_backbone_config(num_layers=1, dropout=0.0)), num_classes=3, dropout=0.0
    )
    cached = {**x, "teacher_logits": teacher.predict(x, verbose=0)["logits"]}
    weights = [w.copy() for w in student.get_weights()]
    results = []
    for inputs in (x, cached):
        student.set_weights(weights)
        d = Distiller(teacher, student, [LogitsTerm(2.0)])
        d.compile(optimizer=keras.optimizers.SGD(0.1))
        d.fit(inputs, epochs=2, batch_size=4, shuffle=False, verbose=0)
        results.append([w.copy() for w in student.get_weights()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_student_embeddings_from_the_teachers_principal_directions():
    from keras_bert_impl.models.distillation.student_init import embeddings_from_teacher

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


# --- intermediate-layer transfer (TinyBERT) -------------------------------------------------


def _deep_pair(teacher_heads=2, student_heads=2, dropout=0.0):
    """A 4-layer, 16-wide teacher and a 2-layer, 8-wide student (a projection is needed).
    Weights drawn wider than BERT's 0.02 so that attention is far from uniform and the KL
    between the two models' attention far from 0 (float32 round-off would dominate it)."""
    spread = dict(dropout=dropout, initializer_range=0.5)
    teacher = BertClassifier(
        BertBackbone(
            **tiny_backbone_config(
                num_layers=4, hidden_dim=16, num_heads=teacher_heads, intermediate_dim=32, **spread
            )
        ),
        num_classes=3,
        dropout=dropout,
    )
    student = BertClassifier(
        BertBackbone(**tiny_backbone_config(num_layers=2, hidden_dim=8, num_heads=student_heads, **spread)),
        num_classes=3,
        dropout=dropout,
    )
    return teacher, student


def _states(backbone, x):
    """Every hidden state and attention probability by calling the layers one by one, eagerly
    (independent of the Distiller's feature graphs): ([L + 1] x [B, T, H], [L] x [B, N, T, T])."""
    h = backbone.embeddings(x["token_ids"], x["segment_ids"])
    hidden, probs = [np.asarray(h, "float64")], []
    for layer in backbone.transformer_layers:
        h, p = layer(h, padding_mask=x["padding_mask"], return_attention_scores=True)
        hidden.append(np.asarray(h, "float64"))
        probs.append(np.asarray(p, "float64"))
    return hidden, probs


def _padded_inputs():
    x = random_inputs(batch=3, length=7, seed=4)
    x["padding_mask"][1, -4:] = 0  # rows with 5, 3 and 7 real tokens
    x["token_ids"] *= x["padding_mask"]
    x["segment_ids"] *= x["padding_mask"]
    return x


def test_transfer_terms_equal_a_hand_computation_with_padding_and_the_projection():
    teacher, student = _deep_pair()
    terms = [
        LogitsTerm(2.0, alpha=0.0),
        HiddenStatesTerm(0.7, layer_map=[1, 3]),
        AttentionTerm(2.0, layer_map=[1, 3]),
        EmbeddingTerm(0.3),
    ]
    distiller = Distiller(teacher, student, terms)
    x = _padded_inputs()
    mask = x["padding_mask"].astype("float64")  # [B, T]
    t_hidden, t_probs = _states(teacher.backbone, x)
    s_hidden, s_probs = _states(student.backbone, x)
    w_h = np.asarray(distiller.hidden_projection.kernel, "float64")  # [8, 16]
    w_e = np.asarray(distiller.embedding_projection.kernel, "float64")

    def mse(s, t):  # [B, T, H] each -> summed over real tokens of the width's mean
        return ((s - t) ** 2).mean(-1)[mask == 1].sum()

    hidden = sum(mse(s_hidden[i + 1] @ w_h, t_hidden[m]) for i, m in enumerate([1, 3])) / (2 * mask.sum())
    embedding = mse(s_hidden[0] @ w_e, t_hidden[0]) / mask.sum()
    kl = 0.0
    for i, m in enumerate([1, 3]):
        p, q = t_probs[m - 1], s_probs[i]  # [B, N, T, T]
        keys = mask[:, None, None, :] == 1
        per_query = np.where(keys, p * np.log(np.where(keys, p, 1) / np.where(keys, q, 1)), 0).sum(
            -1
        )  # [B, N, T]
        kl += (per_query * mask[:, None, :]).sum()
    attention = kl / (2 * 2 * mask.sum())  # layers x heads x real queries

    y_pred = distiller(x)
    np.testing.assert_allclose(y_pred["logits"], student(x)["logits"], atol=1e-6)
    student_features = {key: y_pred[key] for key in ("embedding_output", "hidden_states", "attention_probs")}
    teacher_features = distiller._features.teacher(x)
    terms = distiller.transfer_terms(student_features, teacher_features, x["padding_mask"])
    np.testing.assert_allclose(float(terms["hidden_loss"]), hidden, rtol=1e-5)
    np.testing.assert_allclose(float(terms["attention_loss"]), attention, rtol=1e-4)
    np.testing.assert_allclose(float(terms["embedding_loss"]), embedding, rtol=1e-5)
    assert attention > 0.01 and hidden > 0.01

    soft = float(DistillationLoss(2.0)(teacher(x)["logits"], student(x)["logits"]))
    total = float(distiller.compute_loss(x, None, y_pred))
    np.testing.assert_allclose(total, soft + 0.7 * hidden + 2.0 * attention + 0.3 * embedding, rtol=1e-5)

    # Padded positions count for nothing: other token ids there change no term.
    garbage = dict(x, token_ids=np.where(x["padding_mask"] == 1, x["token_ids"], 17).astype("int32"))
    np.testing.assert_allclose(
        float(distiller.compute_loss(garbage, None, distiller(garbage))), total, rtol=1e-5
    )


def test_the_feature_graphs_give_each_heads_own_outputs():
    x = _padded_inputs()
    token_teacher = BertTokenClassifier(
        BertBackbone(**tiny_backbone_config(num_layers=2, dropout=0.0)), num_classes=5
    )
    token_student = BertTokenClassifier(
        BertBackbone(**tiny_backbone_config(num_layers=1, dropout=0.0)), num_classes=5
    )
    mean_teacher = BertClassifier(
        BertBackbone(**tiny_backbone_config(dropout=0.0)), num_classes=2, pooling="mean"
    )
    # A backbone that outputs its hidden states too: the head's graph reads its outputs by position.
    mean_student = BertClassifier(
        BertBackbone(**tiny_backbone_config(num_layers=1, dropout=0.0, return_hidden_states=True)),
        num_classes=2,
        pooling="mean",
    )
    for teacher, student in ((token_teacher, token_student), (mean_teacher, mean_student)):
        distiller = Distiller(teacher, student, [LogitsTerm(), HiddenStatesTerm(1.0), AttentionTerm(1.0)])
        assert (
            distiller.mapped_layers == [2] and distiller.hidden_projection is None
        )  # same width: no projection
        np.testing.assert_allclose(distiller(x)["logits"], student(x)["logits"], atol=1e-6)
        np.testing.assert_allclose(distiller._features.teacher(x)["logits"], teacher(x)["logits"], atol=1e-6)
        assert np.isfinite(float(distiller.compute_loss(x, None, distiller(x))))


def test_defaults_add_nothing():
    teacher, student = _deep_pair()
    distiller = Distiller(teacher, student)
    x = _padded_inputs()
    assert sorted(distiller(x)) == ["logits"] and distiller.hidden_projection is None
    assert [m.name for m in distiller.metrics] == ["loss", "compile_metrics"]
    assert len(distiller.weights) == len(teacher.weights) + len(student.weights)


@pytest.mark.slow  # about 20 s or more: trains a student with layer transfer
def test_uniform_layer_map_is_tinyberts():
    teacher = BertClassifier(BertBackbone(**tiny_backbone_config(num_layers=6)), num_classes=2)
    for depth, expected in (
        (1, [6]),
        (2, [3, 6]),
        (3, [2, 4, 6]),
        (4, [1, 3, 4, 6]),
        (6, [1, 2, 3, 4, 5, 6]),
    ):
        student = BertClassifier(BertBackbone(**tiny_backbone_config(num_layers=depth)), num_classes=2)
        assert Distiller(teacher, student, [LogitsTerm(), HiddenStatesTerm(1.0)]).mapped_layers == expected


def test_transfer_refusals_quote_the_bad_value():
    teacher, student = _deep_pair()
    cases = [
        (
            lambda: [HiddenStatesTerm(1.0, layer_map=[1, 2, 3])],
            r"one teacher layer per student layer \(2\). Received 3: "
            r"layer_map=\[1, 2, 3\]",
        ),
        (
            lambda: [HiddenStatesTerm(1.0, layer_map=[0, 2])],
            r"layer_map\[0\] must be a teacher layer in \[1, 4\].*"
            r"Received: layer_map\[0\]=0",
        ),
        (
            lambda: [HiddenStatesTerm(1.0, layer_map=[2, 5])],
            r"Received: layer_map\[1\]=5 in layer_map=\[2, 5\]",
        ),
        (lambda: [HiddenStatesTerm(1.0, layer_map=[2, 2.0])], r"Received: layer_map\[1\]=2.0"),
        (
            lambda: [AttentionTerm(1.0, layer_map="even")],
            r"'uniform' or a list of teacher layers. "
            r"Received: layer_map='even'",
        ),
        (
            lambda: [HiddenStatesTerm(-1.0)],
            r"hidden_weight must be a number >= 0. Received: hidden_weight=-1.0",
        ),
        (
            lambda: [AttentionTerm(float("nan"))],
            r"attention_weight must be a number >= 0. "
            r"Received: attention_weight=nan",
        ),
        (
            lambda: [EmbeddingTerm(-0.5)],
            r"embedding_weight must be a number >= 0. Received: embedding_weight=-0.5",
        ),
        (
            lambda: [LogitsTerm(), HiddenStatesTerm(1.0), HiddenStatesTerm(0.5)],
            r"at most one of each kind. Received: terms=",
        ),
        (lambda: [LogitsTerm(), "hidden"], r"list of new DistillationTerms"),
        (lambda: [], r"non-empty list"),
    ]
    for terms, message in cases:
        with pytest.raises(ValueError, match=message):
            Distiller(teacher, student, terms())
    built = [LogitsTerm()]
    Distiller(teacher, student, built)
    with pytest.raises(ValueError, match="one Distiller builds each"):
        Distiller(teacher, student, built)
    deep_student = BertClassifier(BertBackbone(**tiny_backbone_config(num_layers=5)), num_classes=3)
    with pytest.raises(
        ValueError, match="no deeper than the teacher. Received: 5 student layers, 4 teacher layers"
    ):
        Distiller(teacher, deep_student, [LogitsTerm(), HiddenStatesTerm(1.0)])
    teacher4, student2 = _deep_pair(teacher_heads=4, student_heads=2)
    with pytest.raises(ValueError, match="teacher has 4 heads and the student 2. Pass attention_weight=0"):
        Distiller(teacher4, student2, [LogitsTerm(), AttentionTerm(1.0)])
    Distiller(
        teacher4, student2, [LogitsTerm(), HiddenStatesTerm(1.0)]
    )  # hidden states only: heads may differ
    # Cached teacher logits would save nothing: the teacher runs for its hidden states anyway.
    distiller = Distiller(teacher, student, [LogitsTerm(), HiddenStatesTerm(1.0)])
    x = _padded_inputs()
    cached = {**x, "teacher_logits": distiller.teacher_logits(x)}
    with pytest.raises(ValueError, match="cached logits would save nothing: drop teacher_logits"):
        distiller.compute_loss(cached, None, distiller(cached))
    with pytest.raises(
        ValueError, match=r"y_pred lacks \['hidden_states'\]: pass the Distiller's own outputs"
    ):
        distiller.compute_loss(x, None, student(x))


@pytest.mark.slow  # about 20 s or more: saves and reloads a distiller with layer transfer
def test_transfer_config_and_keras_round_trip_keep_the_projections_and_the_loss():
    teacher, student = _deep_pair()
    student_weights = len(student.weights)
    distiller = Distiller(
        teacher, student, [LogitsTerm(), HiddenStatesTerm(1.0), AttentionTerm(0.5), EmbeddingTerm(0.25)]
    )
    distiller.hidden_projection.kernel.assign(np.random.default_rng(0).normal(size=(8, 16)).astype("float32"))
    x = _padded_inputs()
    loss = float(distiller.compute_loss(x, None, distiller(x)))

    config = distiller.get_config()
    assert [(term["class_name"], term["config"]) for term in config["terms"]] == [
        ("LogitsTerm", {"temperature": 2.0, "alpha": 0.0}),
        ("HiddenStatesTerm", {"weight": 1.0, "layer_map": "uniform"}),
        ("AttentionTerm", {"weight": 0.5, "layer_map": "uniform"}),
        ("EmbeddingTerm", {"weight": 0.25}),
    ]
    rebuilt = Distiller.from_config(config)
    assert (
        rebuilt.mapped_layers == [2, 4]
        and rebuilt.get_config()["terms"][1]["config"]["layer_map"] == "uniform"
    )

    loaded = save_and_reload(distiller)
    assert isinstance(loaded, Distiller) and loaded.mapped_layers == [2, 4]
    assert {term.name: term.weight for term in loaded.terms} == {
        "logits_loss": 1.0,
        "hidden_loss": 1.0,
        "attention_loss": 0.5,
        "embedding_loss": 0.25,
    }
    for name in ("hidden_projection", "embedding_projection"):
        np.testing.assert_array_equal(getattr(loaded, name).kernel, getattr(distiller, name).kernel)
    np.testing.assert_allclose(float(loaded.compute_loss(x, None, loaded(x))), loss, rtol=1e-6)
    # The student saves nothing of the transfer: its own weights only, and it reloads alone.
    assert len(student.weights) == student_weights
    copy = save_and_reload(inference_copy(distiller))
    assert type(copy) is BertClassifier and len(copy.weights) == student_weights
    np.testing.assert_allclose(copy(x)["logits"], student(x)["logits"], atol=1e-6)


@pytest.mark.slow  # about 20 s or more: trains a student with fit
def test_fit_reduces_the_hidden_loss_and_logs_each_term():
    teacher, student = _deep_pair()
    distiller = Distiller(teacher, student, [LogitsTerm(), HiddenStatesTerm(1.0), AttentionTerm(1.0)])
    distiller.compile(optimizer=keras.optimizers.Adam(1e-2))
    x = random_inputs(batch=16, length=9, seed=2)
    projection = distiller.hidden_projection.kernel.numpy().copy()
    history = distiller.fit(x, epochs=8, batch_size=8, verbose=0).history
    assert sorted(history) == ["attention_loss", "hidden_loss", "loss"]
    assert history["hidden_loss"][-1] < 0.5 * history["hidden_loss"][0], history["hidden_loss"]
    assert not np.array_equal(projection, distiller.hidden_projection.kernel.numpy())  # W_h is trained
    # The logged terms are the batch means of transfer_terms.
    y_pred = distiller(x)
    terms = distiller.transfer_terms(
        {k: y_pred[k] for k in ("hidden_states", "attention_probs")},
        distiller._features.teacher(x),
        x["padding_mask"],
    )
    evaluated = distiller.evaluate(x, batch_size=16, verbose=0, return_dict=True)
    np.testing.assert_allclose(evaluated["hidden_loss"], float(terms["hidden_loss"]), rtol=1e-5)
