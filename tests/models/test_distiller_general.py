"""General (task-agnostic) distillation of a student backbone: the one Distiller given two
backbones (no logits term). Its loss against a hand computation on the layers called one by
one and against the numbers of the pre-merge classes, training through fit, save/load, and
the refusals."""

import numpy as np
import pytest

import keras
import keras_bert_impl
from keras_bert_impl.models import (
    AttentionTerm,
    BertBackbone,
    DistillationArgumentError,
    Distiller,
    EmbeddingTerm,
    HiddenStatesTerm,
    LogitsTerm,
)
from keras_bert_impl.training import inference_copy
from tests.harness import random_inputs, save_and_reload, tiny_backbone_config
from tests.models.test_distiller import _deep_pair, _padded_inputs, _states


def _backbones(**kwargs):
    teacher, student = _deep_pair(**kwargs)
    return teacher.backbone, student.backbone


def test_loss_equals_a_hand_computation_with_padding_and_the_projections():
    teacher, student = _backbones()
    general = Distiller(
        teacher,
        student,
        [HiddenStatesTerm(0.7, layer_map=[2, 4]), AttentionTerm(2.0, layer_map=[2, 4]), EmbeddingTerm(0.3)],
    )
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


@pytest.mark.slow  # about 20 s or more: trains a student with fit
def test_fit_pulls_the_student_towards_the_teacher_and_leaves_the_teacher_alone():
    teacher, student = _backbones()
    general = Distiller(teacher, student, [HiddenStatesTerm(1.0), AttentionTerm(1.0), EmbeddingTerm(1.0)])
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
    general = Distiller(teacher, student, [HiddenStatesTerm(1.0), EmbeddingTerm(0.5)])
    general.hidden_projection.kernel.assign(np.random.default_rng(0).normal(size=(8, 16)).astype("float32"))
    x = _padded_inputs()
    loss = float(general.compute_loss(x, None, general(x)))
    loaded = save_and_reload(general)
    assert isinstance(loaded, Distiller) and loaded.mapped_layers == [2, 4]
    assert [(term.name, term.weight) for term in loaded.terms] == [
        ("hidden_loss", 1.0),
        ("embedding_loss", 0.5),
    ]
    np.testing.assert_array_equal(loaded.hidden_projection.kernel, general.hidden_projection.kernel)
    np.testing.assert_allclose(float(loaded.compute_loss(x, None, loaded(x))), loss, rtol=1e-6)
    # What a checkpoint of it saves is the student backbone alone, which reloads as one.
    copy = save_and_reload(inference_copy(general))
    assert type(copy) is BertBackbone and len(copy.weights) == len(student.weights)
    np.testing.assert_allclose(copy(x)["sequence_output"], student(x)["sequence_output"], atol=1e-6)


def test_refusals_quote_the_bad_value():
    teacher, student = _backbones()
    with pytest.raises(
        ValueError, match="student must be a BertBackbone like the teacher.*Received: BertClassifier"
    ):
        Distiller(teacher, _deep_pair()[1])
    with pytest.raises(
        ValueError,
        match=r"learns from the teacher's layers only\): give a term a weight > 0. Received: weights",
    ):
        Distiller(teacher, student, [HiddenStatesTerm(0.0), EmbeddingTerm(0.0)])
    with pytest.raises(ValueError, match=r"Received: layer_map\[1\]=5 in layer_map=\[2, 5\]"):
        Distiller(teacher, student, [HiddenStatesTerm(layer_map=[2, 5])])
    with pytest.raises(ValueError, match="teacher has 2 heads and the student 1"):
        Distiller(
            teacher,
            BertBackbone(**tiny_backbone_config(num_heads=1)),
            [HiddenStatesTerm(), AttentionTerm(1.0)],
        )
    with pytest.raises(ValueError, match="token embeddings have 50 and 60 rows"):
        Distiller(teacher, BertBackbone(**tiny_backbone_config(vocabulary_size=60)))
    with pytest.raises(ValueError, match="hidden_weight must be a number >= 0. Received: hidden_weight=-1.0"):
        Distiller(teacher, student, [HiddenStatesTerm(-1.0)])
    with pytest.raises(ValueError, match="LogitsTerm compares logits, which backbones have not"):
        Distiller(teacher, student, [LogitsTerm(), HiddenStatesTerm()])


def test_every_refusal_names_its_argument():
    teacher, student = _backbones()
    cases = [
        ("student", lambda: dict(student=_deep_pair()[1])),
        ("terms", lambda: dict(terms=[HiddenStatesTerm(0.0)])),
        ("layer_map", lambda: dict(terms=[HiddenStatesTerm(layer_map=[2, 5])])),
        ("layer_map", lambda: dict(terms=[HiddenStatesTerm(layer_map="every")])),
        (
            "attention_weight",
            lambda: dict(student=BertBackbone(**tiny_backbone_config(num_heads=1)), terms=[AttentionTerm()]),
        ),
        ("student", lambda: dict(student=BertBackbone(**tiny_backbone_config(vocabulary_size=60)))),
        ("hidden_weight", lambda: dict(terms=[HiddenStatesTerm(-1.0)])),
        ("alpha", lambda: dict(terms=[LogitsTerm(alpha=1.5)])),
        ("temperature", lambda: dict(terms=[LogitsTerm(temperature=0)])),
        ("terms", lambda: dict(terms=[LogitsTerm(alpha=0.5)])),
        ("terms", lambda: dict(terms=[EmbeddingTerm(), EmbeddingTerm()])),
    ]
    for argument, kwargs in cases:
        with pytest.raises(DistillationArgumentError) as error:
            Distiller(**{"teacher": teacher, "student": student, **kwargs()})
        assert error.value.argument == argument, (kwargs(), error.value)


def test_there_is_exactly_one_distiller_class():
    import importlib
    import pkgutil

    for module in pkgutil.walk_packages(keras_bert_impl.__path__, "keras_bert_impl."):
        if module.name.startswith(("keras_bert_impl.cli", "keras_bert_impl.commands")):
            continue  # the command modules define no models, and some import optional tools
        importlib.import_module(module.name)

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    distillers = {
        f"{c.__module__}.{c.__qualname__}"
        for c in subclasses(keras.Model)
        if "distill" in c.__name__.lower() and c.__module__.startswith("keras_bert_impl")
    }
    assert distillers == {"keras_bert_impl.models.distillation.distiller.Distiller"}, distillers


# Computed by the pre-merge code at 136d477 (models/distiller.py's Distiller and
# models/general_distiller.py's GeneralDistiller, float32 on CPU) on this seeded pair, batch
# and projections: the one Distiller must give the same loss and terms.
# The pins are float32 results of one CPU's kernels. On an AMD EPYC Zen 4 (AVX-512, TensorFlow's
# oneDNN on) the logits-KD term came out 1.03e-6 relative (8.3e-7 absolute) from its pin and every
# other term within 1e-6; with oneDNN off (TF_ENABLE_ONEDNN_OPTS=0) all within 1e-6: the summation
# order of oneDNN's AVX-512 matmuls, not the code. 1e-5 (the file's float32 tolerance, as for the
# hand computation above) still catches a change to the loss: each term is over 10% of its
# total, so a dropped term, or a term's weight changed by 1%, moves a total by 1e-3 or more.
PIN_RTOL = 1e-5
PRE_MERGE = {
    "task_total": 4.870978355407715,
    "task_logits_kd": 0.810305655002594,
    "task_labels": 1.7024837732315063,
    "general_total": 3.6145834922790527,
    "hidden_loss": 1.7933061122894287,
    "attention_loss": 0.8965874910354614,
    "embedding_loss": 1.88698148727417,
}


def _seeded_pair():
    keras.utils.set_random_seed(1234)
    return _deep_pair()


def _seeded_projections(distiller):
    rng = np.random.default_rng(99)
    for layer in (distiller.hidden_projection, distiller.embedding_projection):
        layer.kernel.assign(rng.normal(scale=0.3, size=(8, 16)).astype("float32"))


def test_general_and_task_losses_equal_the_pre_merge_classes():
    def terms():
        return [
            HiddenStatesTerm(0.7, layer_map=[1, 3]),
            AttentionTerm(2.0, layer_map=[1, 3]),
            EmbeddingTerm(0.3),
        ]

    x, y = _padded_inputs(), np.array([0, 2, 1])

    teacher, student = _seeded_pair()
    general = Distiller(teacher.backbone, student.backbone, terms())
    assert general.logits_term is None
    _seeded_projections(general)
    np.testing.assert_allclose(
        float(general.compute_loss(x, None, general(x))), PRE_MERGE["general_total"], rtol=PIN_RTOL
    )
    for name, tracker in general.trackers.items():
        np.testing.assert_allclose(float(tracker.result()), PRE_MERGE[name], rtol=PIN_RTOL)

    teacher, student = _seeded_pair()
    task = Distiller(teacher, student, [LogitsTerm(2.0, alpha=0.5), *terms()])
    _seeded_projections(task)
    outputs = task(x)
    np.testing.assert_allclose(
        float(task.compute_loss(x, y, outputs)), PRE_MERGE["task_total"], rtol=PIN_RTOL
    )
    kd = task.logits_term(outputs["logits"], teacher(x)["logits"], None, None)
    np.testing.assert_allclose(float(kd), PRE_MERGE["task_logits_kd"], rtol=PIN_RTOL)
    labels = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, outputs["logits"])
    np.testing.assert_allclose(float(labels), PRE_MERGE["task_labels"], rtol=PIN_RTOL)
    for name, tracker in task.trackers.items():
        np.testing.assert_allclose(float(tracker.result()), PRE_MERGE[name], rtol=PIN_RTOL)


def test_keras_file_round_trip_of_a_general_distiller_with_a_zero_hidden_weight():
    teacher, student = _backbones()
    general = Distiller(teacher, student, [EmbeddingTerm(1.0)])
    loaded = save_and_reload(general)
    assert [(term.kind, term.weight) for term in loaded.terms] == [("embedding", 1.0)]
    assert loaded.mapped_layers is None
    assert sorted(loaded.trackers) == ["embedding_loss"]
    x = _padded_inputs()
    np.testing.assert_allclose(
        float(loaded.compute_loss(x, None, loaded(x))),
        float(general.compute_loss(x, None, general(x))),
        rtol=PIN_RTOL,
    )


def test_a_distiller_saved_with_flat_arguments_still_loads():
    """The config a Distiller wrote while it took flat arguments (temperature, alpha,
    layer_map, one weight per intermediate term) rebuilds the same terms and loss."""
    x, y = _padded_inputs(), np.array([0, 2, 1])
    teacher, student = _deep_pair()
    task = Distiller(
        teacher,
        student,
        [LogitsTerm(3.0, alpha=0.25), HiddenStatesTerm(0.7, layer_map=[1, 3]), EmbeddingTerm(0.3)],
    )
    config = {key: value for key, value in task.get_config().items() if key != "terms"}
    config.update(temperature=3.0, alpha=0.25, layer_map=[1, 3], hidden_weight=0.7, attention_weight=0.0)
    config["embedding_weight"] = 0.3
    rebuilt = Distiller.from_config(config)
    assert [term.get_config() for term in rebuilt.terms] == [term.get_config() for term in task.terms]
    for name in ("hidden_projection", "embedding_projection"):
        getattr(rebuilt, name).set_weights(getattr(task, name).get_weights())
    rebuilt.student.set_weights(student.get_weights())
    rebuilt.teacher.set_weights(teacher.get_weights())
    np.testing.assert_allclose(
        float(rebuilt.compute_loss(x, y, rebuilt(x))), float(task.compute_loss(x, y, task(x))), rtol=1e-6
    )
    general = {
        key: value for key, value in Distiller(teacher.backbone, student.backbone).get_config().items()
    }
    general.pop("terms")
    general.update(layer_map="uniform", hidden_weight=1.0, attention_weight=0.0, embedding_weight=0.0)
    rebuilt = Distiller.from_config(general)
    assert rebuilt.logits_term is None and [term.name for term in rebuilt.terms] == ["hidden_loss"]
    assert rebuilt.mapped_layers == [2, 4]
