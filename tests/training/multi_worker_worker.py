"""One training run for tests/training/test_multi_worker.py.

Usage: python multi_worker_worker.py STRATEGY SEED WEIGHTS.npz
    STRATEGY: a `create_strategy` name ("multi-worker", "auto" or "one-device").
    SEED: the Keras seed for this process's weight initialisation.
    WEIGHTS.npz: where to save the trained weights.

Trains a tiny BertClassifier for STEPS steps at a global batch of GLOBAL_BATCH with
`train`, saves the weights and prints `train`'s summary as one JSON line (the last line of
stdout). The test also imports `train` to run the one-device reference in its own process.
"""

import hashlib
import json
import sys

import keras
import numpy as np
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl.training import create_optimizer, create_strategy

GLOBAL_BATCH = 8
STEPS = 4
SEQUENCE_LENGTH = 8


def weights_hash(weights):
    digest = hashlib.sha256()
    for w in weights:
        digest.update(np.ascontiguousarray(w).tobytes())
    return digest.hexdigest()


def dataset():
    """The same examples, in the same order, in every process (not seeded by SEED)."""
    rng = np.random.default_rng(0)
    n = GLOBAL_BATCH * STEPS
    x = {
        "token_ids": rng.integers(1, 50, (n, SEQUENCE_LENGTH)).astype("int32"),
        "segment_ids": np.zeros((n, SEQUENCE_LENGTH), "int32"),
        "padding_mask": np.ones((n, SEQUENCE_LENGTH), "int32"),
    }
    y = rng.integers(0, 2, n).astype("int32")
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    # In-memory data has no files to shard by, so AUTO would try FILE, fail and fall back to
    # DATA with a warning; ask for DATA directly. tf.distribute splits every global batch of 8
    # into per-replica batches of 4; with DATA worker i keeps every i-th of those, so each
    # step trains on exactly the global batch that one device sees. With OFF both workers
    # would read every per-replica batch: step 1 would train twice on the first half of global
    # batch 0 (loss 0.69187 instead of 0.69320), step 2 twice on its second half, and so on.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return data.with_options(options)


def train(name, seed):
    """Trains with `create_strategy(name)`; returns (summary dict, final weights)."""
    # create_strategy's multi-worker strategy carries the fix for Keras 3.15's reduce calls in fit.
    strategy = create_strategy(name)

    keras.utils.set_random_seed(seed)
    with strategy.scope():
        backbone = kb.BertBackbone(
            vocabulary_size=50,
            num_layers=2,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=16,
            dropout=0.0,
        )
        model = kb.BertClassifier(backbone, num_classes=2, dropout=0.0)
        model.compile(
            optimizer=create_optimizer(1e-3, train_steps=STEPS),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    initial = model.get_weights()

    losses = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(float(logs["loss"]))

    model.fit(dataset(), epochs=1, verbose=0, shuffle=False, callbacks=[Record()])
    final = model.get_weights()
    summary = {
        # tf.distribute.MultiWorkerMirroredStrategy's class is CollectiveAllReduceStrategy.
        "multi_worker": isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy),
        "strategy": type(strategy).__name__,
        "replicas": strategy.num_replicas_in_sync,
        "steps": int(model.optimizer.iterations.numpy()),
        "losses": losses,
        "initial_sha256": weights_hash(initial),
        "sha256": weights_hash(final),
        "moved": float(sum(np.abs(a - b).sum() for a, b in zip(final, initial))),
    }
    return summary, final


def main():
    name, seed, weights_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    summary, weights = train(name, seed)
    np.savez(weights_path, *weights)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
