"""LoRA on the JAX backend (tests/backends/test_lora_backend.py starts it in `.venv-jax`).

    python tests/backends/lora_child.py FOLDER INPUTS.npz

Enables LoRA on a tiny classifier's backbone, fits it, saves FOLDER/model.keras and loads it
back, then prints one JSON object: the trainable variables, whether the frozen ones stayed and
the adapters moved, whether the loaded model has the same weights and outputs; the outputs on
INPUTS.npz go to FOLDER/outputs.npz for the TensorFlow side to compare.
"""

import json
import os
import sys

import keras
import numpy as np

import keras_bert_impl as kb


def main(folder, inputs_path):
    keras.utils.set_random_seed(0)
    with np.load(inputs_path) as f:
        inputs = {k: f[k] for k in f.files}
    backbone = kb.BertBackbone(
        vocabulary_size=40,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
    )
    backbone.enable_lora(2)
    model = kb.BertClassifier(backbone, num_classes=2, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    frozen = {v.path: np.array(v.numpy()) for v in model.weights if not v.trainable}
    model.fit(inputs, np.arange(len(inputs["token_ids"])) % 2, epochs=3, batch_size=3, verbose=0)
    path = os.path.join(folder, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    outputs = loaded.predict(inputs, verbose=0)
    np.savez(os.path.join(folder, "outputs.npz"), **outputs)
    same_outputs = all(np.array_equal(outputs[k], v) for k, v in model.predict(inputs, verbose=0).items())
    report = {
        "backend": keras.backend.backend(),
        "tensorflow_imported": "tensorflow" in sys.modules,
        "trainable": sorted(v.path for v in model.trainable_weights),
        "frozen_kept": all(
            np.array_equal(frozen[v.path], v.numpy()) for v in model.weights if not v.trainable
        ),
        "b_moved": all(np.any(v.numpy()) for v in model.weights if "lora_kernel_b" in v.path),
        "loaded_trainable": sorted(v.path for v in loaded.trainable_weights),
        "same_weights": all(
            np.array_equal(a.numpy(), b.numpy()) for a, b in zip(model.weights, loaded.weights)
        ),
        "same_outputs": same_outputs,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
