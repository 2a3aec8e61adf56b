"""The strategy factory, and mirrored training equal to one-device training."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bert_impl.training import create_strategy

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Each script below defines run(*config), which trains once under `strategy_of(name)` and returns
# what the tests compare; RUNNER runs them all in one fresh process (logical CPU devices must be
# set before TensorFlow starts; starting it once, not once per training, saves seconds of CPU per
# training here).
RUNNER = r"""
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from keras_bert_impl.training import create_strategy

strategies = {}

def strategy_of(name):
    # One strategy of each kind for the process: a second MirroredStrategy's collectives reuse
    # the first one's instance keys and abort on the other model's shapes.
    if name not in strategies:
        strategies[name] = create_strategy(name)
    return strategies[name]

scripts = json.loads(sys.argv[1])
for name, config in json.loads(sys.argv[2]):
    namespace = {"strategy_of": strategy_of}
    exec(scripts[name], namespace)
    print(json.dumps(namespace["run"](*config)), flush=True)
"""

SCRIPT = r"""
import tensorflow as tf
import keras, numpy as np
import keras_bert_impl as kb
from keras_bert_impl.training import create_optimizer

def run(strategy_name, optimizer_name, *extra):
    strategy = strategy_of(strategy_name)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(1, 50, (32, 8)).astype("int32"), "segment_ids": np.zeros((32, 8), "int32"),
         "padding_mask": np.ones((32, 8), "int32")}
    y = rng.integers(0, 2, 32)
    qat = list(extra) == ["qat"]
    with strategy.scope():
        # One block: what is compared (the replicas' gradients summed, clipped and applied as one
        # device's) does not depend on depth, and each block is traced once per replica. For QAT
        # its mirrored graph traces every quantization point per replica (a minute for two blocks
        # here), and one block has every kind of point.
        backbone = kb.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16,
                                   intermediate_dim=32, max_sequence_length=16, dropout=0.0)
        model = kb.BertClassifier(backbone, num_classes=2, dropout=0.0)
        if qat:  # quantization-aware training: ranges from the global batch
            model = kb.QuantizationAwareClassifier(model)
        if optimizer_name == "sgd":
            optimizer = keras.optimizers.SGD(0.5)
        elif optimizer_name == "bert":
            # A clip norm the gradients exceed (about 0.2 here), so clipping is active at every step.
            optimizer = create_optimizer(1e-2, train_steps=4, warmup_steps=0, global_clipnorm=0.05)
        else:  # Keras' own AdamW, which clips each replica's share before the all-reduce
            optimizer = keras.optimizers.AdamW(1e-2, global_clipnorm=0.05)
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    losses = []
    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(float(logs["loss"]))
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    model.fit(dataset, epochs=1, verbose=0, callbacks=[Record()])
    return {"replicas": strategy.num_replicas_in_sync, "losses": losses}
"""


# The pretrainer, whose MLM loss is a mean over the real masked positions: in every global
# batch of 8 the first replica's 4 examples hold 1 real position each, the second's 4 each.
PRETRAINER_SCRIPT = r"""
import tensorflow as tf
import keras, numpy as np
import keras_bert_impl as kb

def run(strategy_name, loss_name):
    strategy = strategy_of(strategy_name)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(5, 50, (32, 8)).astype("int32"), "segment_ids": np.zeros((32, 8), "int32"),
         "padding_mask": np.ones((32, 8), "int32"),
         "mask_positions": rng.integers(1, 8, (32, 4)).astype("int32")}
    y = {"mlm_logits": rng.integers(5, 50, (32, 4)), "nsp_logits": rng.integers(0, 2, 32)}
    mlm_weights = np.where((np.arange(32) % 8 < 4)[:, None], [1.0, 0.0, 0.0, 0.0],
                           [1.0, 1.0, 1.0, 1.0]).astype("float32")
    w = {"mlm_logits": mlm_weights, "nsp_logits": np.ones(32, "float32")}
    with strategy.scope():
        # One block, as the classifier's script: the loss's reduction is what is compared.
        backbone = kb.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16,
                                   intermediate_dim=32, max_sequence_length=16, dropout=0.0)
        model = kb.BertPretrainer(backbone)
        mlm_loss = (keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                               reduction="mean_with_sample_weight")
                    if loss_name == "per-replica-mean" else model.loss["mlm_logits"])
        model.compile(optimizer=keras.optimizers.SGD(0.5),
                      loss={"mlm_logits": mlm_loss,
                            "nsp_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
    losses = []
    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(float(logs["loss"]))
    dataset = tf.data.Dataset.from_tensor_slices((x, y, w)).batch(8)
    model.fit(dataset, epochs=1, verbose=0, callbacks=[Record()])
    return {"replicas": strategy.num_replicas_in_sync, "losses": losses}
"""


# The project's own training path under a strategy: the default loss (GlobalBatchLoss),
# create_optimizer, and fit_resumable with a BackupAndRestore inside the strategy's scope,
# as TrainingRun calls them. 21 rows at batch 8: every epoch ends on a partial batch of 5,
# which two replicas split 3 and 2. A config: strategy, backup folder, "resume" or "straight".
RESUME_SCRIPT = r"""
import tensorflow as tf
import keras, numpy as np
import keras_bert_impl as kb
from keras_bert_impl.training import BackupAndRestore, create_optimizer, fit_resumable

EPOCHS, STEPS = 3, 3

class Interrupt(keras.callbacks.Callback):
    steps = 0

    def on_train_batch_begin(self, batch, logs=None):  # step 6, the partial batch: the backup holds step 5
        self.steps += 1
        if self.steps == 6:
            raise KeyboardInterrupt

def run(strategy_name, backup_dir, mode):
    strategy = strategy_of(strategy_name)
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(1, 50, (21, 8)).astype("int32"), "segment_ids": np.zeros((21, 8), "int32"),
         "padding_mask": np.ones((21, 8), "int32")}
    y = rng.integers(0, 2, 21)

    def dataset_fn():
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(8).repeat(EPOCHS)

    def build():
        keras.utils.set_random_seed(0)
        with strategy.scope():
            backbone = kb.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16,
                                       intermediate_dim=32, max_sequence_length=16, dropout=0.0)
            model = kb.BertClassifier(backbone, num_classes=2, dropout=0.0)
            model.compile(optimizer=create_optimizer(1e-2, train_steps=EPOCHS * STEPS, warmup_steps=0))
        return model

    def fit(model, callbacks=()):
        backup = BackupAndRestore(backup_dir, save_every=1)
        with strategy.scope():
            fit_resumable(model, dataset_fn, EPOCHS, STEPS, backup=backup, callbacks=list(callbacks),
                          verbose=0)
        return backup

    if mode == "resume":
        try:
            fit(build(), [Interrupt()])
            raise SystemExit("the interrupt did not happen")
        except KeyboardInterrupt:
            pass
    model = build()
    restored = fit(model).restored_step
    weights = np.concatenate([np.ravel(w) for w in model.get_weights()])
    np.save(backup_dir + ".weights.npy", weights)
    return {"replicas": strategy.num_replicas_in_sync, "restored_step": restored}
"""


# Float16 loss scaling when only the second replica's rows overflow at the first scale
# (2**15): rows 4..7 of the one batch of 8. A config: strategy, "ours" or "keras" (the optimizer).
FP16_SCRIPT = r"""
import tensorflow as tf
import keras, numpy as np
from keras_bert_impl.training import AllReplicaLossScaleOptimizer, create_optimizer

def run(strategy_name, optimizer_name):
    keras.config.set_dtype_policy("mixed_float16")
    try:
        return _run(strategy_name, optimizer_name)
    finally:
        keras.config.set_dtype_policy("float32")

def _run(strategy_name, optimizer_name):
    strategy = strategy_of(strategy_name)
    keras.utils.set_random_seed(0)
    x = np.ones((8, 4), "float32")
    x[4:] *= 300.0
    y = np.zeros((8, 1), "float32")
    y[4:] = 300.0
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        wrapper = (AllReplicaLossScaleOptimizer if optimizer_name == "ours"
                   else keras.optimizers.LossScaleOptimizer)
        model.compile(optimizer=wrapper(create_optimizer(1e-3, train_steps=10, warmup_steps=0)), loss="mse")
    before = model.get_weights()
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8), epochs=1, verbose=0)
    after = model.get_weights()
    return {"replicas": strategy.num_replicas_in_sync,
            "scale": float(model.optimizer.dynamic_scale.numpy()),
            "unchanged": all(bool(np.array_equal(a, b)) for a, b in zip(after, before)),
            "finite": all(bool(np.isfinite(a).all()) for a in after)}
"""


SCRIPTS = {
    "classifier": SCRIPT,
    "pretrainer": PRETRAINER_SCRIPT,
    "resume": RESUME_SCRIPT,
    "fp16": FP16_SCRIPT,
}


@pytest.fixture(scope="module")
def trainings(tmp_path_factory):
    """Every training the tests below compare, run in one process: ({test: its trainings'
    results, in the order listed}, the folder of the resume test's backups and weights)."""
    backups = tmp_path_factory.mktemp("backups")
    wanted = {
        "plain": ("classifier", [["one-device", "sgd"], ["mirrored", "sgd"]]),
        "qat": ("classifier", [["one-device", "sgd", "qat"], ["mirrored", "sgd", "qat"]]),
        "clipping": (
            "classifier",
            [
                ["one-device", "bert"],
                ["mirrored", "bert"],
                ["one-device", "keras-adamw"],
                ["mirrored", "keras-adamw"],
            ],
        ),
        "pretrainer": (
            "pretrainer",
            [
                ["one-device", "ours"],
                ["mirrored", "ours"],
                ["one-device", "per-replica-mean"],
                ["mirrored", "per-replica-mean"],
            ],
        ),
        "resume": (
            "resume",
            [
                ["one-device", str(backups / "one"), "straight"],
                ["mirrored", str(backups / "mirrored"), "resume"],
            ],
        ),
        "fp16": ("fp16", [["one-device", "ours"], ["mirrored", "ours"], ["mirrored", "keras"]]),
    }
    runs = [[name, config] for name, configs in wanted.values() for config in configs]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO, KERAS_BACKEND="tensorflow")
    out = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(SCRIPTS), json.dumps(runs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    results = iter(json.loads(line) for line in out.stdout.strip().splitlines()[-len(runs) :])
    return {test: [next(results) for _ in configs] for test, (_, configs) in wanted.items()}, backups


@pytest.mark.slow  # about 20 s or more: trains on one and on two devices
def test_mirrored_matches_one_device(trainings):
    one, mirrored = trainings[0]["plain"]
    assert one["replicas"] == 1 and mirrored["replicas"] == 2
    assert len(one["losses"]) == len(mirrored["losses"]) == 4
    print("one-device", one["losses"], "mirrored", mirrored["losses"])
    for a, b in zip(one["losses"], mirrored["losses"]):
        assert abs(a - b) <= 1e-4


@pytest.mark.slow  # about 30 s or more: trains on one and on two devices
def test_mirrored_quantization_aware_training_matches_one_device(trainings):
    """QAT's moving ranges take the whole global batch's extremes (gathered from the
    replicas), so two replicas train as one device does."""
    one, mirrored = trainings[0]["qat"]
    assert mirrored["replicas"] == 2 and len(one["losses"]) == len(mirrored["losses"]) == 4
    print("one-device", one["losses"], "mirrored", mirrored["losses"])
    for a, b in zip(one["losses"], mirrored["losses"]):
        assert abs(a - b) <= 1e-4


@pytest.mark.slow  # about 20 s or more: trains on one and on two devices
def test_mirrored_matches_one_device_with_bert_optimizer_clipping(trainings):
    # create_optimizer's AdamW clips by the norm of the summed gradient of all replicas.
    one, mirrored, keras_one, keras_mirrored = trainings[0]["clipping"]
    print("one-device", one["losses"], "mirrored", mirrored["losses"])
    for a, b in zip(one["losses"], mirrored["losses"]):
        assert abs(a - b) <= 1e-4
    # What this guards against: Keras' AdamW clips each replica's half of the gradient,
    # so the same run drifts away from one device.
    drift = max(abs(a - b) for a, b in zip(keras_one["losses"], keras_mirrored["losses"]))
    print("Keras AdamW, per-replica clipping: max loss difference", drift)
    assert drift > 1e-4


@pytest.mark.slow  # about 20 s or more: trains on one and on two devices
def test_mirrored_pretrainer_matches_one_device_with_uneven_masked_positions(trainings):
    # MaskedSparseCrossentropy divides each replica's sum by the weight of the whole batch.
    one, mirrored, keras_one, keras_mirrored = trainings[0]["pretrainer"]
    assert (
        one["replicas"] == 1
        and mirrored["replicas"] == 2
        and len(one["losses"]) == len(mirrored["losses"]) == 4
    )
    print("one-device", one["losses"], "mirrored", mirrored["losses"])
    for a, b in zip(one["losses"], mirrored["losses"]):
        assert abs(a - b) <= 1e-4
    # What this guards against: a per-replica mean (Keras' "mean_with_sample_weight") weighs
    # the first replica's lone positions four times as much as one device does.
    np.testing.assert_allclose(
        keras_one["losses"][0], one["losses"][0], rtol=1e-5
    )  # the same loss on one device
    drift = max(abs(a - b) for a, b in zip(keras_one["losses"], keras_mirrored["losses"]))
    print("per-replica mean: max loss difference", drift)
    assert drift > 1e-3


@pytest.mark.slow  # about 40 s: trains on one and on two devices
def test_mirrored_resumed_run_with_partial_batches_matches_one_device(trainings):
    """The library's training path under mirrored: backups are written (an optimizer variable
    of only_first_replica aggregation once failed to convert), a resume whose first batch is
    the partial one runs (Keras' first-batch reduce once failed on the 3/2 split), and the
    partial batches weigh their rows as one device does (a per-replica mean once gave
    (mean of 3 + mean of 2) / 2: weights 8.8e-3 apart)."""
    (one, mirrored), backups = trainings[0]["resume"], trainings[1]
    assert mirrored["replicas"] == 2 and one["restored_step"] == 0 and mirrored["restored_step"] == 5
    a, b = np.load(backups / "one.weights.npy"), np.load(backups / "mirrored.weights.npy")
    print("max weight difference, one device vs mirrored resumed:", float(np.max(np.abs(a - b))))
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-5)


@pytest.mark.slow  # about 30 s: trains on one and on two devices
def test_fp16_step_is_skipped_on_every_replica_when_one_overflows(trainings):
    one, mirrored, keras_mirrored = trainings[0]["fp16"]
    assert mirrored["replicas"] == 2
    # One device skips the step and halves the scale; so do two replicas together.
    assert one == {"replicas": 1, "scale": 2.0**14, "unchanged": True, "finite": True}
    assert mirrored == {**one, "replicas": 2}
    # What this guards against: Keras' LossScaleOptimizer takes the first replica's verdict,
    # applies the second replica's infinite gradient, and the weights turn NaN.
    print("Keras' LossScaleOptimizer under mirrored:", keras_mirrored)
    assert keras_mirrored["finite"] is False


def test_unknown_strategy_and_missing_tf_config(monkeypatch):
    with pytest.raises(ValueError, match="strategy='gpu'"):
        create_strategy("gpu")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="needs TF_CONFIG"):
        create_strategy("multi-worker")
