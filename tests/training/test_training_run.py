"""A run folder trained through the Python API (`TrainingSpec`, the example of docs/training.md
as written), killed with SIGKILL mid-epoch and run again: it resumes at the backed-up step
and ends with exactly the weights of an uninterrupted run; a third run leaves it alone."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.test_readme import python_block
from tests.training.test_kill_resume import _env, kill_mid_run

SECTION = "## Training a run folder from Python"
EPOCHS, STEPS = 3, 10  # the example's

# Prepended to the example: each step is reported to ./step (so the test knows when the run
# is mid-epoch) and, in the run kill_mid_run starts, slowed a little so the kill lands while it
# trains; neither touches the numbers.
PRELUDE = r"""
import dataclasses
import os
import time
import keras
import keras_bert_impl.training


class _Report(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        with open("step", "w") as f:
            f.write(str(int(self.model.optimizer.iterations.numpy())))
        time.sleep(float(os.environ.get("KILL_TEST_PACE", "0")))


_run_training = keras_bert_impl.training.run_training
keras_bert_impl.training.run_training = lambda spec: _run_training(
    dataclasses.replace(spec, callbacks=(*spec.callbacks, _Report()))
)
"""


def docs_example():
    return python_block("docs/training.md", SECTION)


def _command():
    return [sys.executable, "-c", PRELUDE + docs_example()]


def _finish(folder):
    done = subprocess.run(_command(), cwd=folder, capture_output=True, text=True, env=_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _weights(folder):
    return keras.saving.load_model(os.path.join(folder, "runs", "python", "model.keras")).get_weights()


@pytest.mark.slow  # three training processes, about a minute
def test_python_run_folder_resumes_after_sigkill_to_the_uninterrupted_weights(tmp_path):
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    reference.mkdir()
    killed.mkdir()
    _finish(reference)
    run = reference / "runs" / "python"
    with open(run / "metrics.json", encoding="utf-8") as f:
        best_file = json.load(f)["best"]["file"]
    # best.keras only when the best epoch is not the last; the backup goes once the run is finished.
    kept = ["best.keras", "best.keras.json"] if best_file == "best.keras" else []
    assert sorted(os.listdir(run)) == sorted([*kept, "logs", "metrics.json", "model.keras", "run.json"])
    with open(run / "run.json", encoding="utf-8") as f:
        assert json.load(f)["state"] == "finished"

    # Kill inside the second epoch, after the backup at step 12 (a multiple of save_every, mid-epoch).
    killed_at = kill_mid_run(_command(), killed, STEPS + 4, cwd=killed)
    assert STEPS < killed_at < EPOCHS * STEPS, f"the kill should land mid-run, it landed at step {killed_at}"
    assert not (killed / "runs" / "python" / "model.keras").exists()

    resumed = _finish(killed)  # the same script again
    with open(killed / "runs" / "python" / "metrics.json", encoding="utf-8") as f:
        metrics = json.load(f)
    restored = metrics["resumed_from_step"]
    assert 0 < restored <= killed_at and restored % STEPS != 0, (
        f"resumed at step {restored}, killed at {killed_at}"
    )
    assert f"resumed from the backup at step {restored} of {EPOCHS * STEPS}" in resumed.stderr
    assert len(metrics["history"]["loss"]) == EPOCHS
    for a, b in zip(_weights(reference), _weights(killed)):
        np.testing.assert_array_equal(a, b)

    again = _finish(killed)  # a finished run is left as it is
    assert "already holds this finished run" in again.stderr
    assert "val_loss" not in again.stdout
