"""Trains a run folder through `TrainingSpec` and `run_training` on a Keras backend without
TensorFlow (tests/backends/test_training_spec_backend.py starts it in `.venv-jax`).

    python tests/backends/training_spec_child.py FOLDER INPUTS.npz

Trains a tiny classifier on numpy batches into FOLDER/run, twice the same spec (the second
call must find the run finished), then prints one JSON object: what the folder holds, the
run's record and metrics, whether TensorFlow was imported, and the saved model's logits on
INPUTS.npz (written to FOLDER/outputs.npz) for the TensorFlow side to compare.
"""

import json
import os
import sys

import keras
import numpy as np

import keras_bert_impl as kb
from keras_bert_impl.training import TrainingData, TrainingSpec, create_optimizer, run_training

EPOCHS, STEPS, BATCH, LENGTH, VOCABULARY = 2, 3, 4, 10, 40


def batches():
    rng = np.random.default_rng(0)
    out = []
    for _ in range(STEPS):
        mask = (np.arange(LENGTH)[None] < rng.integers(3, LENGTH + 1, (BATCH, 1))).astype("int32")
        x = {
            "token_ids": rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * mask,
            "segment_ids": np.zeros((BATCH, LENGTH), "int32"),
            "padding_mask": mask,
        }
        out.append((x, rng.integers(0, 2, BATCH)))
    return out


def build(data):
    backbone = kb.BertBackbone(
        vocabulary_size=VOCABULARY,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
        dropout=0.0,
    )
    model = kb.BertClassifier(backbone, num_classes=2, dropout=0.0)
    model.compile(optimizer=create_optimizer(1e-3, train_steps=data.epochs * data.steps_per_epoch))
    return model


def main(folder, inputs_path):
    train = batches()
    spec = TrainingSpec(
        output=os.path.join(folder, "run"),
        settings={"epochs": EPOCHS, "batch_size": BATCH},
        data=lambda run: TrainingData(
            dataset_fn=lambda: train, epochs=EPOCHS, steps_per_epoch=STEPS, validation=train[0]
        ),
        model=build,
        best=("val_loss", "min"),
        final_metrics=lambda result: {"history": result.history, "best": result.best},
        save_every=2,
        verbose=0,
    )
    result = run_training(spec)
    again = run_training(spec)
    run = os.path.join(folder, "run")
    with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
        record = json.load(f)
    with open(os.path.join(run, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    model = keras.saving.load_model(os.path.join(run, "model.keras"))
    with np.load(inputs_path) as loaded:
        outputs = model.predict(dict(loaded), verbose=0)  # the head's named outputs
    np.savez(
        os.path.join(folder, "outputs.npz"), **{k: keras.ops.convert_to_numpy(v) for k, v in outputs.items()}
    )
    report = {
        "backend": keras.backend.backend(),
        "tensorflow_imported": "tensorflow" in sys.modules,
        "entries": sorted(os.listdir(run)),
        "state": record["state"],
        "settings": record["settings"],
        "metrics": metrics,
        "returned_metrics_equal_file": result.metrics == metrics,
        "second_call": again,
        "saved_class": type(model).__name__,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
