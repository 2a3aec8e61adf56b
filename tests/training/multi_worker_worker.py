"""One training run for tests/training/test_multi_worker.py.

Usage: python multi_worker_worker.py STRATEGY SEED WEIGHTS.npz [MODEL]
(backups go to WEIGHTS.npz.backup/)
    STRATEGY: a `create_strategy` name ("multi-worker", "auto" or "one-device").
    SEED: the Keras seed for this process's weight initialisation.
    WEIGHTS.npz: where to save the trained weights.
    MODEL: "classifier" (default) or "pretrainer" (MLM + NSP, whose MLM loss all-reduces
        the count of real masked positions).

Trains a tiny BertClassifier or BertPretrainer for STEPS steps at a global batch of GLOBAL_BATCH with
`train`, saves the weights and prints `train`'s summary as one JSON line (the last line of
stdout). The test also imports `train` to run the one-device reference in its own process.
"""

import hashlib
import json
import os
import sys

import keras
import numpy as np
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl.training import BackupAndRestore, create_optimizer, create_strategy, fit_resumable

GLOBAL_BATCH = 8
STEPS = 4
SEQUENCE_LENGTH = 8


def weights_hash(weights):
    digest = hashlib.sha256()
    for w in weights:
        digest.update(np.ascontiguousarray(w).tobytes())
    return digest.hexdigest()


def dataset(model_kind="classifier"):
    """The same examples, in the same order, in every process (not seeded by SEED)."""
    rng = np.random.default_rng(0)
    n = GLOBAL_BATCH * STEPS
    x = {
        "token_ids": rng.integers(1, 50, (n, SEQUENCE_LENGTH)).astype("int32"),
        "segment_ids": np.zeros((n, SEQUENCE_LENGTH), "int32"),
        "padding_mask": np.ones((n, SEQUENCE_LENGTH), "int32"),
    }
    y = rng.integers(0, 2, n).astype("int32")
    if model_kind == "classifier":
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    else:
        # 4 prediction slots; the first half of every global batch (one worker's share) has
        # 1 real masked position per example, the second half 4, so the workers' MLM
        # losses only add up to one device's if each divides by the global count.
        x["mask_positions"] = rng.integers(1, SEQUENCE_LENGTH, (n, 4)).astype("int32")
        real = np.where(
            (np.arange(n) % GLOBAL_BATCH < GLOBAL_BATCH // 2)[:, None], [1, 0, 0, 0], [1, 1, 1, 1]
        )
        labels = {"mlm_logits": rng.integers(1, 50, (n, 4)).astype("int32"), "nsp_logits": y}
        weights = {"mlm_logits": real.astype("float32"), "nsp_logits": np.ones(n, "float32")}
        data = tf.data.Dataset.from_tensor_slices((x, labels, weights)).batch(GLOBAL_BATCH)
    # In-memory data has no files to shard by, so AUTO would try FILE, fail and fall back to
    # DATA with a warning; ask for DATA directly. tf.distribute splits every global batch of 8
    # into per-replica batches of 4; with DATA worker i keeps every i-th of those, so each
    # step trains on exactly the global batch that one device sees. With OFF both workers
    # would read every per-replica batch: step 1 would train twice on the first half of global
    # batch 0 (loss 0.69187 instead of 0.69320), step 2 twice on its second half, and so on.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return data.with_options(options)


def train(name, seed, model_kind="classifier", backup_dir=None):
    """Trains with `create_strategy(name)` through `fit_resumable`, backing up every step to
    `backup_dir` as TrainingRun does (None: plain `fit`); returns (summary dict, final weights)."""
    if model_kind not in ("classifier", "pretrainer"):
        raise ValueError(f"MODEL must be classifier or pretrainer. Received: {model_kind!r}")
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
        if model_kind == "classifier":
            model = kb.BertClassifier(backbone, num_classes=2, dropout=0.0)
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        else:
            model = kb.BertPretrainer(backbone)
            loss = model.loss  # MaskedSparseCrossentropy for MLM, as `kbert pretrain`
        model.compile(optimizer=create_optimizer(1e-3, train_steps=STEPS), loss=loss)
    initial = model.get_weights()

    losses = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(float(logs["loss"]))

    backup = None
    if backup_dir is None:
        model.fit(dataset(model_kind), epochs=1, verbose=0, shuffle=False, callbacks=[Record()])
    else:
        backup = BackupAndRestore(backup_dir, save_every=1)
        with strategy.scope():  # where TrainingRun calls it: backups are written inside the scope
            fit_resumable(
                model, lambda: dataset(model_kind), 1, STEPS, backup=backup, callbacks=[Record()], verbose=0
            )
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
        # The step of the backup file on disk (None: none written; only the chief writes).
        "backup_step": None if backup is None or not os.path.exists(backup.path) else backup.saved_step,
    }
    return summary, final


def main():
    name, seed, weights_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    summary, weights = train(
        name, seed, sys.argv[4] if len(sys.argv) > 4 else "classifier", weights_path + ".backup"
    )
    np.savez(weights_path, *weights)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
