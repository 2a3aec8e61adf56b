"""LoRA (BertBackbone.enable_lora) trained, saved and loaded on the JAX backend, in `.venv-jax`;
the .keras file JAX wrote loads on TensorFlow with the same adapters and outputs."""

import json
import os

import keras
import numpy as np
import pytest

from tests.conftest import REPO
from tests.side_venv import run_in_side_venv

CHILD = os.path.join(REPO, "tests", "backends", "lora_child.py")

pytestmark = (
    pytest.mark.slow
)  # a JAX process that imports Keras, fits and saves: about 29 s on the 2-core CI machine


def test_jax_fits_saves_and_loads_a_lora_classifier(tmp_path):
    rng = np.random.default_rng(1)
    mask = (np.arange(10)[None] < rng.integers(3, 11, (6, 1))).astype("int32")
    inputs = {
        "token_ids": rng.integers(1, 40, (6, 10)).astype("int32") * mask,
        "segment_ids": np.zeros((6, 10), "int32"),
        "padding_mask": mask,
    }
    np.savez(tmp_path / "inputs.npz", **inputs)
    out = run_in_side_venv(
        ".venv-jax",
        CHILD,
        str(tmp_path),
        str(tmp_path / "inputs.npz"),
        env={"KERAS_BACKEND": "jax"},
        timeout=600,
    )
    report = json.loads(out.strip().splitlines()[-1])
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
