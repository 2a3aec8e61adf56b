"""What a demanding user of the JAX and PyTorch backends meets beyond the workout of
test_backends.py: mixed_float16 under a compiled predict, out-of-range token ids given to
fit/evaluate/predict, masked-LM positions past the sequence, a .keras file that holds the in-graph tokenizer,
mixed precision through fit, save and load, and a model trained with `create_optimizer` loaded
in a fresh process (saved on TensorFlow, loaded there).

Each check runs in a side venv without TensorFlow (tests/side_venv.py): fresh_load_child.py for
a process that imports only keras_bert_impl (one process per backend for both of its loads),
which then runs backend_child.py's `edges` (in the same process, after those loads: one start of
the backend and its imports for both).
"""

import json
import os

import numpy as np
import pytest

from tests.backends.side_run import run_backend_child
from tests.backends.test_backends import BACKENDS
from tests.conftest import REPO

# A side-venv subprocess per backend and check (the PyTorch venv takes ~30 s to import torch).
pytestmark = pytest.mark.slow

FRESH_LOAD_CHILD = os.path.join(REPO, "tests", "backends", "fresh_load_child.py")
CONFIG = dict(
    vocabulary_size=60, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=32
)


def ids(rows=4, length=6, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "token_ids": rng.integers(5, 60, (rows, length)).astype("int32"),
        "segment_ids": np.zeros((rows, length), "int32"),
        "padding_mask": np.ones((rows, length), "int32"),
    }


@pytest.fixture(scope="module")
def saved_on_tensorflow(tmp_path_factory):
    """Files written on TensorFlow: a classifier after 2 steps of create_optimizer (AdamW with
    warm-up, its no-decay names), and a text-in model (BertPreprocessor -> BertClassifier)."""
    import keras
    import tensorflow as tf

    import keras_bert_impl as kb
    from keras_bert_impl.tokenization import BertPreprocessor
    from keras_bert_impl.training import create_optimizer

    folder = tmp_path_factory.mktemp("saved_on_tensorflow")
    classifier = kb.BertClassifier(kb.BertBackbone(**CONFIG), num_classes=2)
    classifier.compile(
        optimizer=create_optimizer(1e-3, train_steps=10, warmup_steps=1), loss=classifier.default_loss()
    )
    classifier.fit(ids(), np.array([0, 1, 0, 1]), batch_size=2, epochs=1, verbose=0)
    classifier.save(folder / "trained.keras")

    backbone = kb.BertBackbone(**CONFIG)
    backbone.set_vocabulary(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(55)], lowercase=True
    )
    text = keras.Input(shape=(), dtype="string", name="text")
    classifier = kb.BertClassifier(backbone, num_classes=2)
    text_in = keras.Model(text, classifier(BertPreprocessor.from_model(classifier, sequence_length=8)(text)))
    assert text_in(tf.constant(["w1 w2"]))["logits"].shape == (1, 2)
    text_in.save(folder / "text_in.keras")
    return {"trained": str(folder / "trained.keras"), "text_in": str(folder / "text_in.keras")}


@pytest.fixture(scope="module")
def children(saved_on_tensorflow):
    """{backend: (fresh_load_child.py's report, backend_child.py's `edges` report)}, from one
    process per backend: first a load of the trained classifier before and one after `import
    keras_bert_impl.training`, then the edges on the text-in file."""
    reports = {}
    for backend in BACKENDS:
        lines = run_backend_child(
            backend, FRESH_LOAD_CHILD, saved_on_tensorflow["trained"], saved_on_tensorflow["text_in"]
        )
        fresh, edges = lines.strip().splitlines()[-2:]
        reports[backend] = (json.loads(fresh), json.loads(edges))
    return reports


@pytest.fixture(scope="module")
def edges(children):
    return {backend: reports[1] for backend, reports in children.items()}


@pytest.fixture(scope="module")
def fresh_loads(children):
    """fresh_load_child.py on the trained classifier, per backend: a load before and one after
    `import keras_bert_impl.training`."""
    return {backend: reports[0] for backend, reports in children.items()}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_mixed_float16_model_predicts_compiled(backend, edges):
    """JAX's fused attention asked XLA for a float16 x float16 -> float32 dot, which the CPU
    lacks: every jitted call of a mixed_float16 model failed ("The precision 'F16_F16_F32' is
    not supported by dot_general on CPU")."""
    result = edges[backend]["float16_predict"]
    assert isinstance(result, dict), result
    assert result["finite"] and result["dtype"] == "float16", result
    # The compiled and the eager call: the same float16 network (measured ~2e-3 apart).
    assert result["max_abs_diff_vs_call"] <= 1e-2, result


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_range_token_ids_are_refused_by_fit_evaluate_and_predict(backend, edges):
    """Under fit/evaluate/predict the model sees traced tensors: on JAX an id past the
    vocabulary gave NaN outputs silently (predict) instead of the error a call gives."""
    for method, answer in edges[backend]["out_of_range"].items():
        assert answer.startswith("ValueError: Input 'token_ids' holds the value"), (method, answer)
        assert "outside [0, 60)" in answer and "vocab.txt" in answer, (method, answer)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_positions_past_the_sequence_are_refused(backend, edges):
    """A masked-LM position past the sequence is no token: it gave NaN logits on JAX and
    finite logits on PyTorch, both without an error."""
    for method, answer in edges[backend]["mask_positions_out_of_range"].items():
        assert answer.startswith("ValueError: Input 'mask_positions' holds the value 12, outside [0, 12)"), (
            method,
            answer,
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_text_in_model_says_it_loads_on_tensorflow_only(backend, edges):
    answer = edges[backend]["text_in_load"]
    assert answer.startswith("TensorFlowOnlyError: The model being loaded holds a BertPreprocessor layer"), (
        answer
    )
    assert f"'{backend}' backend" in answer and "without the preprocessor" in answer, answer


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_a_mixed_precision_head_keeps_its_policy_and_loss_scaling_through_save_and_load(
    backend, policy, edges
):
    """Keras' functional __init__ dropped BertBackbone's `dtype`: the model's own policy stayed
    float32, so its config said float32 and the loaded backbone ran in float32, and a head on
    a mixed_float16 backbone compiled without loss scaling (then lost its saved optimizer)."""
    result = edges[backend]["mixed_precision_round_trip"][policy]
    assert isinstance(result, dict), result
    loss_scaled = policy == "mixed_float16"
    assert result["built"] == {
        "head_policy": policy,
        "optimizer": "LossScaleOptimizer" if loss_scaled else "Adam",
    }, result
    assert result["loaded"] == {
        "backbone_policy": policy,
        "encoder_policy": policy,
        "sequence_output_dtype": policy.split("_")[1],
        "optimizer": "LossScaleOptimizer" if loss_scaled else "Adam",
        "iterations": 1,
    }, result


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_trained_with_create_optimizer_loads_after_import_keras_bert_impl(backend, fresh_loads):
    """`import keras_bert_impl` registers what the library saves: a .keras file with
    create_optimizer's GlobalClipAdamW and WarmupPolynomialDecay failed to load ("Could not
    locate class 'GlobalClipAdamW'") unless the script had imported keras_bert_impl.training."""
    report = fresh_loads[backend]["plain"]
    assert report.get("optimizer") == "GlobalClipAdamW", report
    assert report["iterations"] == 2, report  # the saved state: two steps taken on TensorFlow


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reloaded_create_optimizer_still_exempts_layer_norm_and_bias_from_weight_decay(
    backend, fresh_loads
):
    """Keras' AdamW does not save `exclude_from_weight_decay`'s names: reloaded, it decayed
    every LayerNorm gamma/beta and bias that create_optimizer exempts, as BERT does."""
    report = fresh_loads[backend]["import_training"]
    exempt = [path for path in report["trainable"] if path.rsplit("/", 1)[-1] in ("gamma", "beta", "bias")]
    assert exempt and report["decayed"], report
    assert not set(report["decayed"]) & set(exempt), sorted(set(report["decayed"]) & set(exempt))
    assert set(report["decayed"]) == set(report["trainable"]) - set(exempt), report
