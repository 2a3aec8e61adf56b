"""The model code on Keras' JAX and PyTorch backends, in venvs without TensorFlow.

Each check runs tests/backends/backend_child.py in a subprocess: `.venv-jax` (Python 3.12,
JAX 0.11.2 on the CPU, the GPU machine's versions) and `.venv-torch` (PyTorch 2.13.0's CPU
build), each with Keras 3.15.1 and this repository on PYTHONPATH (`make backend-venvs`;
`make test` builds them). The TensorFlow side here computes the references.
"""

import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from tests.backends.side_run import VENVS, last_json, run_backend_child
from tests.conftest import DATA, REPO
from tests.side_venv import side_python

# Subprocesses of a few minutes in all (make test runs them; make test-fast needs no side venv).
pytestmark = pytest.mark.slow

CHILD = os.path.join(REPO, "tests", "backends", "backend_child.py")
BACKENDS = sorted(VENVS)
# Real MR sentences of several lengths (file order), padded to the longest of the batch.
PARITY_SENTENCES = 48


def run_child(backend, *args, xla_flags=(), timeout=900):
    """Runs backend_child.py on `backend`; returns its stdout (the JSON report, if any)."""
    return run_backend_child(backend, CHILD, *args, xla_flags=xla_flags, timeout=timeout)


@pytest.fixture(scope="module")
def workouts(tmp_path_factory, minilm_keras, mr_inputs):
    """backend_child.py's workout on each backend, run once for the module's tests: ({backend:
    (its report, its folder)}). The same process first runs the real MiniLM's forward on
    `mr_inputs` (`inputs.npz` in the folder; the outputs in `out.npz`), which would otherwise
    start the backend a second time."""
    reports = {}
    for backend in BACKENDS:
        folder = tmp_path_factory.mktemp(f"workout_{backend}")
        np.savez(folder / "inputs.npz", **mr_inputs)
        forward = [minilm_keras, str(folder / "inputs.npz"), str(folder / "out.npz")]
        reports[backend] = (last_json(run_child(backend, "workout", str(folder), *forward)), str(folder))
    return reports


@pytest.fixture(scope="module")
def mr_inputs(minilm):
    """Real MR sentences tokenized by our in-graph preprocessor, as numpy, cut to the longest row."""
    from bench.corpora.mr_split import load_mr
    from keras_bert_impl.tokenization import BertPreprocessor

    texts, _ = load_mr(os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv"))
    features = BertPreprocessor.from_model(minilm, sequence_length=64)(texts[:PARITY_SENTENCES])
    features = {key: value.numpy() for key, value in features.items()}
    width = int(features["padding_mask"].sum(1).max())
    return {
        key: features[key][:, :width].astype("int32") for key in ("token_ids", "segment_ids", "padding_mask")
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_real_minilm_saved_on_tensorflow_gives_the_same_sequence_output(
    backend, minilm_keras, mr_inputs, workouts
):
    import keras

    model = keras.saving.load_model(minilm_keras)
    expected = model(mr_inputs)["sequence_output"].numpy()  # [48, T, 384]
    assert (
        mr_inputs["padding_mask"].sum(1).min() < mr_inputs["token_ids"].shape[1]
    )  # padded rows are in the batch
    # The backend's outputs: its child (the workout's process) loaded the file and ran it on them.
    folder = workouts[backend][1]
    with np.load(os.path.join(folder, "inputs.npz")) as given:
        assert all(np.array_equal(given[key], value) for key, value in mr_inputs.items())
    with np.load(os.path.join(folder, "out.npz")) as out:
        got = out["sequence_output"]
        assert got.shape == expected.shape
        real = mr_inputs["padding_mask"].astype(bool)  # [48, T]: the sentences' own tokens
        difference = float(np.max(np.abs(got[real] - expected[real])))
        assert difference <= 1e-5, (
            f"{backend}: max |difference| {difference:.2e} from TensorFlow's over {real.sum()} tokens"
        )
        # Padded positions carry no meaning (every head masks them), and their vectors differ
        # more between backends: the [PAD] rows' LayerNorm has a small variance, which
        # magnifies float32 rounding (measured 3.7e-5 on JAX, 2.8e-5 on PyTorch; 3e-6 on tokens).
        assert float(np.max(np.abs(got[~real] - expected[~real]))) <= 1e-4
        np.testing.assert_allclose(
            out["pooled_output"], model(mr_inputs)["pooled_output"].numpy(), atol=1e-5, rtol=0
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_head_trains_with_fit_and_round_trips(backend, workouts):
    report, _ = workouts[backend]
    assert report["backend"] == backend
    assert report["tensorflow_imported"] is False  # the model code ran without TensorFlow
    assert set(report["heads"]) == {
        "classifier",
        "classifier_mean_pooling",
        "multi_label_classifier",
        "token_classifier",
        "span_labeler",
        "pretrainer",
    }
    for name, head in report["heads"].items():
        losses = head["losses"]
        assert all(np.isfinite(losses)), (name, losses)
        assert losses[-1] < losses[0], (name, losses)  # three epochs on the same 8 rows: the loss goes down
        # Every weight moved but the pooler's two, which heads without [CLS] pooling do not use.
        assert head["weights_changed"] >= head["weights"] - 2, (name, head)
        assert head["reload_max_abs_diff"] <= 1e-6, (name, head)


@pytest.mark.parametrize("backend", BACKENDS)
def test_layers_masks_and_optimizer_schedule_behave_as_on_tensorflow(backend, workouts):
    report, _ = workouts[backend]
    assert report["backbone_shapes"] == {
        "sequence_output": [8, 12, 16],
        "pooled_output": [8, 16],
        "hidden_states": [8, 3, 12, 16],
        "attention_probs": [8, 2, 2, 12, 12],
    }
    assert report["attention_on_padding"] == 0.0  # padded keys get exactly zero probability
    assert report["attention_row_sums"] == pytest.approx([1.0, 1.0], abs=1e-6)
    assert report["causal_upper_triangle"] == 0.0
    assert report["cross_attention_shape"] == [1, 3, 8]
    assert max(report["fused_minus_explicit"].values()) <= 1e-6, report["fused_minus_explicit"]
    assert report["embedder_norms"] == pytest.approx([1.0] * 8, abs=1e-6)
    # WarmupPolynomialDecay's docstring values (checked on TensorFlow by the docstring test).
    assert report["schedule"] == pytest.approx([0.0, 2.5e-05, 5e-05, 2.5e-05, 0.0, 0.0], rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_both_distillers_train_with_every_term(backend, workouts):
    report, _ = workouts[backend]
    for name in ("distiller", "general_distiller"):
        history = report[name]
        for term in ("loss", "hidden_loss", "attention_loss", "embedding_loss"):
            assert len(history[term]) == 3 and all(np.isfinite(history[term])), (name, term, history)
        assert history["loss"][-1] < history["loss"][0], (name, history["loss"])
    assert report["distiller"]["reload_max_abs_diff"] <= 1e-6


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensorflow_only_parts_say_so(backend, workouts):
    refusals = workouts[backend][0]["refusals"]
    assert set(refusals) == {
        "BertPreprocessor",
        "keras_bert_impl.data",
        "keras_bert_impl.inference",
        "create_strategy",
        "keras_bert_impl_export",
    }
    for part, message in refusals.items():
        assert "runs on TensorFlow only" in message, (part, message)
        assert f"'{backend}' backend" in message, (part, message)
    assert "keras.distribution" in refusals["create_strategy"]
    assert "numpy arrays" in refusals["BertPreprocessor"]
    assert "model.save" in refusals["keras_bert_impl_export"]


def test_tensorflow_only_parts_on_the_tensorflow_backend_still_run():
    from keras_bert_impl.backend_support import require_tensorflow

    assert require_tensorflow("anything", "nothing") is tf


def test_a_model_saved_on_jax_loads_on_tensorflow_and_exports(workouts, tmp_path):
    """The classifier trained and saved on JAX: Keras on TensorFlow gives JAX's logits, and
    `kbert export` turns it into a SavedModel whose id signature gives them too."""
    import keras

    from keras_bert_impl.cli import main

    _, folder = workouts["jax"]
    path = os.path.join(folder, "saved_here.keras")
    with np.load(os.path.join(folder, "saved_here_inputs.npz")) as data:
        x = {key: data[key] for key in data.files}
    with np.load(os.path.join(folder, "saved_here_outputs.npz")) as data:
        jax_logits = data["logits"]
    model = keras.saving.load_model(path)
    np.testing.assert_allclose(model(x)["logits"].numpy(), jax_logits, atol=1e-5, rtol=0)
    assert model.label_names == ["neg", "pos"] and len(model.backbone.vocabulary) == 60

    output = str(tmp_path / "export")
    assert (
        main(["export", "--model", path, "--output", output, "--formats", "saved_model", "--seq-len", "16"])
        == 0
    )
    served = tf.saved_model.load(os.path.join(output, "serving", "bert_ids", "1")).signatures[
        "serving_default"
    ]
    logits = served(
        ids=tf.constant(x["token_ids"]),
        mask=tf.constant(x["padding_mask"]),
        segment_ids=tf.constant(x["segment_ids"]),
    )["logits"].numpy()
    np.testing.assert_allclose(logits, jax_logits, atol=1e-5, rtol=0)


def test_jax_data_parallel_over_two_devices_gives_the_one_device_losses():
    """keras.distribution.DataParallel over two host devices: the same per-step losses as one
    device, with clipping active and rows of different lengths and masked-LM weights, so each
    device's share differs (the JAX twin of tests/training/test_strategy.py's mirrored check)."""
    report = last_json(
        run_child("jax", "data-parallel", xla_flags=["--xla_force_host_platform_device_count=2"])
    )
    assert len(report["devices"]) == 2, report["devices"]
    assert report["mesh_shape"] == [2] and report["batch_layout_axes"][0] == "batch", (
        report
    )  # batches split in two
    for name in ("classifier", "pretrainer"):
        one, parallel = report[name]["one_device"], report[name]["data_parallel"]
        assert len(one) == len(parallel) == 8  # 4 epochs of 2 steps
        np.testing.assert_allclose(parallel, one, atol=1e-4, rtol=0, err_msg=name)
        assert one[-1] != one[0]  # the model trained: the steps' losses differ


def test_the_child_imports_no_tensorflow():
    """Guard for the checks above: the side venvs have no TensorFlow to fall back on."""
    for backend in BACKENDS:
        code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('tensorflow') is not None)"
        assert subprocess.run([side_python(VENVS[backend]), "-c", code]).returncode == 0, backend
