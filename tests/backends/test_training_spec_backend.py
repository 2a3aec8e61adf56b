"""A run folder trained through `TrainingSpec` on the JAX backend, in `.venv-jax` (no TensorFlow
there): training/ imports nothing TensorFlow-only, and what it saves loads on TensorFlow with the
same logits."""

import os

import keras
import numpy as np
import pytest

from tests.backends.side_run import run_on_jax_with_inputs
from tests.conftest import REPO

CHILD = os.path.join(REPO, "tests", "backends", "training_spec_child.py")

pytestmark = (
    pytest.mark.slow
)  # a JAX process that imports Keras and trains: about 20 s on the 2-core CI machine


def test_jax_trains_and_saves_a_run_folder_through_the_spec(tmp_path):
    report, inputs = run_on_jax_with_inputs(CHILD, tmp_path)
    assert report["backend"] == "jax" and report["tensorflow_imported"] is False
    # No logs/ (Keras' TensorBoard callback writes through tf.summary); best.keras only when the
    # best epoch is not the last; the backup goes once the run is finished.
    best_file = report["metrics"]["best"]["file"]
    kept = ["best.keras", "best.keras.json"] if best_file == "best.keras" else []
    assert report["entries"] == sorted([*kept, "metrics.json", "model.keras", "run.json"])
    assert report["state"] == "finished" and report["settings"] == {"batch_size": 4, "epochs": 2}
    assert (
        len(report["metrics"]["history"]["loss"]) == 2 and len(report["metrics"]["history"]["val_loss"]) == 2
    )
    assert all(np.isfinite(report["metrics"]["history"]["loss"]))
    assert report["returned_metrics_equal_file"] is True
    assert report["second_call"] is None  # the finished run is left as it is
    assert report["saved_class"] == "BertClassifier"
    # The model JAX saved gives TensorFlow the outputs it gave JAX.
    model = keras.saving.load_model(tmp_path / "run" / "model.keras")
    expected = model.predict(inputs, verbose=0)
    with np.load(tmp_path / "outputs.npz") as got:
        assert sorted(got.files) == sorted(expected)
        for key in got.files:
            np.testing.assert_allclose(got[key], expected[key], atol=1e-5, rtol=0)
