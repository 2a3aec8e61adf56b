"""Loads a .keras file in a fresh process that imports only keras and keras_bert_impl, as a
user's script does, on one Keras backend (tests/backends/test_backend_edges.py starts it
in a side venv); prints one JSON object.

    python tests/backends/fresh_load_child.py MODEL.keras [import-training]

(`import-training` imports keras_bert_impl.training before loading, as a training script does.)

Reports the loaded optimizer's class and iteration count, or the error, and which trainable
variables its weight decay applies to (Keras' own test, `_use_weight_decay`, which its AdamW
asks of every variable at every step).
"""

import json
import sys

import keras

import keras_bert_impl  # noqa: F401  (registers what the library saves)


def main(path, *flags):
    if "import-training" in flags:
        import keras_bert_impl.training  # noqa: F401
    try:
        model = keras.saving.load_model(path)
    except Exception as error:  # the report names what was raised
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
        return
    optimizer = model.optimizer
    variables = model.trainable_variables
    decayed = sorted(v.path for v in variables if optimizer._use_weight_decay(v))
    print(
        json.dumps(
            {
                "optimizer": type(optimizer).__name__,
                "iterations": int(keras.ops.convert_to_numpy(optimizer.iterations)),
                "decayed": decayed,
                "trainable": sorted(v.path for v in variables),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
