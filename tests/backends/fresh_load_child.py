"""Loads a .keras file in a fresh process that imports only keras and keras_bert_impl, as a
user's script does, on one Keras backend (tests/backends/test_backend_edges.py starts it
in a side venv); then imports keras_bert_impl.training, as a training script does, and loads
it again. Prints one JSON object: {"plain": ..., "import_training": ...}, a report per load.

    python tests/backends/fresh_load_child.py MODEL.keras

Each report gives the loaded optimizer's class and iteration count, or the error, and which
trainable variables its weight decay applies to (Keras' own test, `_use_weight_decay`, which
its AdamW asks of every variable at every step).
"""

import json
import sys

import keras

import keras_bert_impl  # noqa: F401  (registers what the library saves)


def load(path):
    try:
        model = keras.saving.load_model(path)
    except Exception as error:  # the report names what was raised
        return {"error": f"{type(error).__name__}: {error}"}
    optimizer = model.optimizer
    variables = model.trainable_variables
    return {
        "optimizer": type(optimizer).__name__,
        "iterations": int(keras.ops.convert_to_numpy(optimizer.iterations)),
        "decayed": sorted(v.path for v in variables if optimizer._use_weight_decay(v)),
        "trainable": sorted(v.path for v in variables),
    }


def main(path):
    report = {"plain": load(path)}  # before anything imports keras_bert_impl.training
    import keras_bert_impl.training  # noqa: F401

    report["import_training"] = load(path)
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
