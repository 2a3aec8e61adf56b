"""The kill test: a training process killed with SIGKILL mid-epoch, restarted with the
same command, ends with exactly the weights of an uninterrupted run; for a classifier and for
its quantization-aware training (whose learned activation ranges are weights too)."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPOCHS, STEPS, SAVE_EVERY = 3, 10, 3
# Seconds a step of the run to be killed sleeps (kill_mid_run sets it): the uninterrupted and the
# resumed runs, which nothing stops, train at full speed.
PACE_VARIABLE, PACE = "KILL_TEST_PACE", "0.15"

# The training "command". It reports its step to a file (so the test knows when it is
# mid-epoch) and, in the run to be killed (PACE_VARIABLE set), sleeps a little per step so the
# kill lands while it trains; neither touches the numbers. Dropout is on, so equal weights also
# mean equal dropout masks.
SCRIPT = r"""
import json, os, sys, time
import keras, numpy as np, tensorflow as tf
import keras_bert_impl as kb
from keras_bert_impl.training import create_optimizer
from keras_bert_impl.training.backup_and_restore import BackupAndRestore
from keras_bert_impl.training.fit_resumable import fit_resumable

out, epochs, steps, save_every, kind = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                        sys.argv[5])
keras.utils.set_random_seed(0)
backbone = kb.BertBackbone(vocabulary_size=60, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                           max_sequence_length=16, dropout=0.1)
model = kb.BertClassifier(backbone, num_classes=3, dropout=0.1)
if kind == "qat":
    model = kb.QuantizationAwareClassifier(model)
model.compile(optimizer=create_optimizer(1e-3, train_steps=epochs * steps),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
rng = np.random.default_rng(0)
n = steps * 8
x = {"token_ids": rng.integers(1, 60, (n, 12)).astype("int32"), "segment_ids": np.zeros((n, 12), "int32"),
     "padding_mask": (np.arange(12)[None] < rng.integers(4, 13, (n, 1))).astype("int32")}
y = rng.integers(0, 3, n)
dataset_fn = lambda: tf.data.Dataset.from_tensor_slices((x, y)).shuffle(n, seed=7).batch(8)

pace = float(os.environ.get("KILL_TEST_PACE", "0"))

class Report(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        with open(os.path.join(out, "step"), "w") as f:
            f.write(str(int(self.model.optimizer.iterations.numpy())))
        time.sleep(pace)

backup = BackupAndRestore(os.path.join(out, "backup"), save_every=save_every)
fit_resumable(model, dataset_fn, epochs=epochs, steps_per_epoch=steps, backup=backup, callbacks=[Report()],
              verbose=0)
np.savez(os.path.join(out, "final.npz"), *model.get_weights())
print(json.dumps({"restored_step": backup.restored_step, "step": int(model.optimizer.iterations.numpy())}))
"""


def _command(out, kind):
    return [sys.executable, "-c", SCRIPT, str(out), str(EPOCHS), str(STEPS), str(SAVE_EVERY), kind]


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO, KERAS_BACKEND="tensorflow")


def _finish(out, kind):
    done = subprocess.run(_command(out, kind), capture_output=True, text=True, env=_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _weights(out):
    with np.load(os.path.join(out, "final.npz")) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def _step(out):
    try:
        with open(os.path.join(out, "step")) as f:
            return int(f.read() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def kill_mid_run(command, folder, step, cwd=None):
    """Starts `command` with PACE_VARIABLE set, SIGKILLs it once `folder`/step reports `step`
    (or it ends, or 300 s pass) and returns the step it was killed at."""
    env = dict(_env(), **{PACE_VARIABLE: PACE})
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 300
    while _step(folder) < step and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    killed_at = _step(folder)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, process.stderr.read()[-3000:]
    return killed_at


@pytest.mark.slow  # about 20 s or more: three training processes: uninterrupted, killed, resumed
@pytest.mark.parametrize("kind", ["classifier", "qat"])
def test_sigkill_mid_epoch_then_same_command_gives_identical_weights(tmp_path, kind):
    reference_dir, killed_dir = tmp_path / "reference", tmp_path / "killed"
    reference_dir.mkdir()
    killed_dir.mkdir()
    assert _finish(reference_dir, kind) == {"restored_step": 0, "step": EPOCHS * STEPS}

    # Kill inside the second epoch, after the backup at step 12 (a multiple of SAVE_EVERY, mid-epoch).
    killed_at = kill_mid_run(_command(killed_dir, kind), killed_dir, STEPS + 4)
    assert STEPS < killed_at < EPOCHS * STEPS, f"the kill should land mid-run, it landed at step {killed_at}"
    assert not (killed_dir / "final.npz").exists()

    resumed = _finish(killed_dir, kind)  # the same command again
    assert resumed["step"] == EPOCHS * STEPS
    restored = resumed["restored_step"]
    assert 0 < restored <= killed_at and restored % STEPS != 0, (
        f"resumed at step {restored}, killed at {killed_at}"
    )
    print(f"killed at step {killed_at}, resumed from the backup at step {restored}")
    for a, b in zip(_weights(reference_dir), _weights(killed_dir)):
        np.testing.assert_array_equal(a, b)


def _backup_step(out):
    try:
        with np.load(os.path.join(out, "backup", "training_state.npz")) as state:
            return json.loads(bytes(state["meta"]).decode())["step"]
    except (OSError, ValueError, KeyError):
        return -1


@pytest.mark.slow  # about 20 s or more: three kbert pretrain processes: uninterrupted, killed, resumed
def test_pretrain_killed_in_its_second_pass_resumes_to_the_uninterrupted_weights(tmp_path, capsys):
    """kbert pretrain over its records' passes: a run killed after a pass boundary trains on the
    uninterrupted run's batches. Its reader reshuffled each pass from a generator that every
    iterator the process made advanced; a resumed run trained another pass's order (rows twice and
    never) and ended with other weights. The records are written in this process; the three runs
    each have a process of their own (run in this one, whose TensorFlow had done other work first,
    the uninterrupted and the resumed run ended 2.5e-8 apart)."""
    import csv

    import keras

    from keras_bert_impl.cli import main

    with open(
        os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee1.csv"), encoding="utf-8-sig", newline=""
    ) as f:
        reviews = [row for _, row in zip(range(3), csv.reader(f))]
    corpus = tmp_path / "reviews.csv"
    with open(corpus, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(reviews)
    records = tmp_path / "records"
    status = main(
        [
            "pretrain-data",
            str(corpus),
            "--format",
            "reviews-csv",
            "--vocab",
            os.path.join(REPO, "data", "minilm", "vocab.txt"),
            "--output",
            str(records),
            "--seq-len",
            "32",
            "--max-predictions",
            "5",
            "--dupe-factor",
            "1",
            "--quiet",
        ]
    )
    assert status == 0, capsys.readouterr().err[-3000:]
    with open(records / "pretraining.json") as f:
        per_pass = -(-json.load(f)["examples"] // 8)  # batches of 8 in one pass over the records
    assert per_pass >= 4, per_pass

    def command(out):
        return [
            sys.executable,
            "-m",
            "keras_bert_impl.cli",
            "pretrain",
            "--records",
            str(records),
            "--vocab",
            os.path.join(REPO, "data", "minilm", "vocab.txt"),
            "--preset",
            "bert_tiny",
            "--seq-len",
            "32",
            "--batch-size",
            "8",
            "--steps",
            str(3 * per_pass),
            "--steps-per-epoch",
            str(per_pass),
            "--save-every",
            "2",
            "--learning-rate",
            "1e-3",
            "--quiet",
            "--output",
            str(out),
        ]

    reference, killed = tmp_path / "reference", tmp_path / "killed"
    done = subprocess.run(command(reference), capture_output=True, text=True, env=_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    process = subprocess.Popen(command(killed), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
    deadline = time.monotonic() + 300
    while _backup_step(killed) <= per_pass and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    restored = _backup_step(killed)
    assert process.returncode == -signal.SIGKILL and per_pass < restored < 3 * per_pass, restored
    done = subprocess.run(command(killed), capture_output=True, text=True, env=_env(), timeout=600)
    assert done.returncode == 0 and f"resumed from the backup at step {restored}" in done.stderr, done.stderr[
        -3000:
    ]
    for a, b in zip(
        keras.saving.load_model(reference / "model.keras").get_weights(),
        keras.saving.load_model(killed / "model.keras").get_weights(),
    ):
        np.testing.assert_array_equal(a, b)
