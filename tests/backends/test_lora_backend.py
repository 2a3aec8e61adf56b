"""LoRA (BertBackbone.enable_lora) trained, saved and loaded on the JAX backend, in `.venv-jax`;
the .keras file JAX wrote loads on TensorFlow with the same adapters and outputs."""

import os

import keras
import numpy as np
import pytest

from tests.backends.side_run import run_on_jax_with_inputs
from tests.conftest import REPO

CHILD = os.path.join(REPO, "tests", "backends", "lora_child.py")

pytestmark = (
    pytest.mark.slow
)  # a JAX process that imports Keras, fits and saves: about 29 s on the 2-core CI machine


def test_jax_fits_saves_and_loads_a_lora_classifier(tmp_path):
    report, inputs = run_on_jax_with_inputs(CHILD, tmp_path)
    assert report["backend"] == "jax" and report["tensorflow_imported"] is False
    adapters = [
        f"transformer_layer_0/attention/{name}/lora_kernel_{ab}" for name in ("query", "value") for ab in "ab"
    ]
    assert report["trainable"] == sorted([*adapters, "logits/bias", "logits/kernel"])
    assert report["loaded_trainable"] == report["trainable"]
    assert report["frozen_kept"] and report["b_moved"]
    assert report["same_weights"] and report["same_outputs"]
    model = keras.saving.load_model(tmp_path / "model.keras")
    assert model.backbone.lora_settings == {"rank": 2, "alpha": 2, "targets": ["query", "value"]}
    expected = model.predict(inputs, verbose=0)
    with np.load(tmp_path / "outputs.npz") as got:
        for key in got.files:
            np.testing.assert_allclose(got[key], expected[key], atol=1e-5, rtol=0)
