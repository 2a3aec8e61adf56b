"""Loads a .keras file in a fresh process that imports only keras and keras_bert_impl, as a
user's script does, on one Keras backend (tests/backends/test_backend_edges.py starts it
in a side venv); then imports keras_bert_impl.training, as a training script does, and loads
it again. Prints one JSON object: {"plain": ..., "import_training": ...}, a report per load.

    python tests/backends/fresh_load_child.py MODEL.keras [TEXT_IN.keras]

With TEXT_IN.keras, the same process then runs backend_child.py's `edges` on it (after both
loads, so they still come first; one start of the backend and its imports for both), and prints
its JSON object on a second line.

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


def main(path, text_in_path=None):
    report = {"plain": load(path)}  # before anything imports keras_bert_impl.training
    import keras_bert_impl.training  # noqa: F401

    report["import_training"] = load(path)
    print(json.dumps(report), flush=True)
    if text_in_path is not None:
        from tests.backends.backend_child import edges

        edges(text_in_path)


if __name__ == "__main__":
    main(*sys.argv[1:])
