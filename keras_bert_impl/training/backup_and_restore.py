"""Fault tolerance: the whole training state, saved atomically every N steps, restored exactly.

Keras' own `keras.callbacks.BackupAndRestore` restarts an interrupted epoch from
its first batch (it restores the epoch number, not the data position), writes
its files in place (a kill during the write leaves a torn file) and cannot tell
a backup of another model from a corrupt one. This callback keeps, in one file:

- every model variable, including the dropout layers' seed-generator states, so
  the resumed run draws the same dropout masks;
- every optimizer variable: the step counter (which drives the learning-rate
  schedule), Adam's moments, a loss scale;
- the global step, the epoch, and a fingerprint of the model (its config and
  the paths, shapes and dtypes of its variables);
- the logs of every finished epoch, so a resumed run's history starts at epoch 0
  and not at the epoch the last process began with.

`fit_resumable` (fit_resumable.py) turns the restored step into the data
position. The file is written next to its destination and renamed into place,
so a process killed at any instant leaves either the previous backup or the new
one, never a mixture.
"""

import contextlib
import json
import os
import zipfile

import keras
import numpy as np

from keras_bert_impl.atomic_write import interrupts_deferred, write_atomically
from keras_bert_impl.validation import check_positive_int

STATE_FILE = "training_state.npz"
FORMAT_VERSION = 1


class BackupError(ValueError):
    """A backup directory that cannot be resumed from (corrupt, or another model's)."""


def _flatten(value, prefix=""):
    """{"a": {"b": 1}} -> {"a.b": 1}: to name the config fields that differ."""
    if isinstance(value, dict):
        flat = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: value}


def _comparable(config):
    # Layer names carry Keras' per-process counters (bert_backbone_1, _2, ...): not part of the model.
    return {k: v for k, v in _flatten(config).items() if k.split(".")[-1] != "name"}


def _to_numpy(variable):
    """The variable's value as a NumPy array, also for a distributed variable.

    Under MirroredStrategy and MultiWorkerMirroredStrategy, a variable with aggregation
    ONLY_FIRST_REPLICA (the optimizer's `iteration`) cannot be converted to NumPy inside the
    strategy's scope ("object __array__ method not producing an array"), and callbacks run
    inside it. Every replica holds the same value, so the first local copy is the value.
    """
    value = variable.value
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        value = tf.distribute.get_strategy().experimental_local_results(value)[0]
    return np.asarray(keras.ops.convert_to_numpy(value))


def _spec(variables):
    return [[v.path, list(v.shape), str(v.dtype)] for v in variables]


class BackupAndRestore(keras.callbacks.Callback):
    """Backs up the training state every `save_every` steps and at each epoch end.

    Args:
        backup_dir: str. Folder for the backup (created on the first save). Give each
            training run its own: a backup of another model there is an error.
        save_every: int or None. Also save after every `save_every` training steps (batches;
            None: only at epoch ends).
        fingerprint: JSON-serialisable dict or None. Settings that must match to resume
            (e.g. the model config); None uses `model.get_config()`.

    Example:
    >>> from keras_bert_impl.training import fit_resumable
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> dataset_fn = lambda: tf.data.Dataset.from_tensor_slices((np.ones((8, 4)), np.ones((8, 1)))).batch(2)
    >>> backup = BackupAndRestore("run/backup", save_every=2)
    >>> _ = fit_resumable(model, dataset_fn, epochs=1, steps_per_epoch=6, backup=backup, verbose=0)
    >>> os.listdir("run/backup"), backup.saved_step
    (['training_state.npz'], 6)
    >>> BackupAndRestore("run/backup").restore(model)  # the step a restarted run resumes from
    6
    """

    def __init__(self, backup_dir, save_every=None, fingerprint=None):
        super().__init__()
        if not isinstance(backup_dir, (str, os.PathLike)) or not os.fspath(backup_dir):
            raise ValueError(f"backup_dir must be a folder path. Received: backup_dir={backup_dir!r}")
        save_every = check_positive_int("save_every", save_every, allow_none=True)
        self.backup_dir = os.fspath(backup_dir)
        self.save_every = save_every
        self.fingerprint = fingerprint
        self.path = os.path.join(self.backup_dir, STATE_FILE)
        self.restored_step = 0
        self.saved_step = None
        # Batches trained, earlier processes included: the step the backup records. Not the
        # optimizer's `iterations`, which a LossScaleOptimizer (--precision fp16) does not advance
        # on the batches whose gradients overflowed, so a backup at `iterations` would resume the
        # data stream that many batches early and train them again.
        self.step = 0
        self._epoch_start_step = 0
        # [epoch, {metric: value}] of every finished epoch of the run, earlier processes included.
        self.epoch_logs = []

    # -- restore ----------------------------------------------------------------

    def _fingerprint(self, model):
        config = self.fingerprint if self.fingerprint is not None else model.get_config()
        # Round-trip through JSON so tuples and lists compare equal to what was stored.
        return json.loads(json.dumps(config, default=str))

    def _load(self):
        try:
            with np.load(self.path, allow_pickle=False) as data:
                meta = json.loads(bytes(data["meta"]).decode("utf-8"))
                arrays = [data[f"v{i}"] for i in range(len(meta["variables"]))]
        except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError, UnicodeDecodeError) as e:
            raise BackupError(
                f"The backup {self.path} is corrupt and cannot be read ({type(e).__name__}: {e}). "
                "Training does not start from scratch on its own: delete that folder to start over, "
                "or use another output folder."
            ) from e
        if meta.get("format_version") != FORMAT_VERSION:
            raise BackupError(
                f"The backup {self.path} has format_version={meta.get('format_version')!r}; this version of "
                f"keras_bert_impl reads {FORMAT_VERSION}. Delete the folder to start over."
            )
        return meta, arrays

    def _check_match(self, meta, model, variables):
        stored, current = _comparable(meta["fingerprint"]), _comparable(self._fingerprint(model))
        differ = sorted(
            k for k in set(stored) | set(current) if stored.get(k, "<absent>") != current.get(k, "<absent>")
        )
        if differ:
            shown = "; ".join(
                f"{k}: backup {stored.get(k, '<absent>')!r}, now {current.get(k, '<absent>')!r}"
                for k in differ[:6]
            )
            more = f" (and {len(differ) - 6} more)" if len(differ) > 6 else ""
            raise BackupError(
                f"The backup in {self.backup_dir} is of another model or run configuration: {shown}{more}. "
                "Resume with the settings it was written with, or use another output folder "
                "(or delete this one) to start a new run."
            )
        spec = _spec(variables)
        # Shapes and dtypes in order; paths only name them (they carry the layer-name counters).
        if [s[1:] for s in meta["variables"]] != [s[1:] for s in spec]:
            mismatched = [f"{a} vs {b}" for a, b in zip(meta["variables"], spec) if a[1:] != b[1:]] or [
                f"{len(meta['variables'])} variables in the backup, {len(spec)} now"
            ]
            raise BackupError(
                f"The backup in {self.backup_dir} does not fit this model's variables: {mismatched[:3]}. "
                "Use another output folder (or delete this one) to start a new run."
            )

    def _variables(self, model):
        optimizer = model.optimizer
        if optimizer is None:
            raise ValueError(
                "BackupAndRestore needs a compiled model: call model.compile(optimizer=...) first."
            )
        if not optimizer.built:
            # The optimizer's moments must exist to be restored into (and saved).
            strategy = getattr(model, "distribute_strategy", None)
            with strategy.scope() if strategy is not None else contextlib.nullcontext():
                optimizer.build(model.trainable_variables)
        return list(model.variables) + list(optimizer.variables)

    def restore(self, model):
        """Loads the backup into `model` and its optimizer if there is one.

        Returns:
            int: the global step to resume from (0 when there is no backup).

        Raises:
            BackupError: the backup is corrupt or was written for another model.
        """
        self.restored_step = self.step = 0
        self.epoch_logs = []
        if not os.path.exists(self.path):
            if os.path.isdir(self.backup_dir) and any(
                not n.startswith(".tmp-") for n in os.listdir(self.backup_dir)
            ):
                raise BackupError(
                    f"{self.backup_dir} holds files but no {STATE_FILE}: it is not a backup folder of "
                    "this library, or its backup was deleted. Use an empty or new folder."
                )
            return 0
        meta, arrays = self._load()
        variables = self._variables(model)
        self._check_match(meta, model, variables)
        for variable, value in zip(variables, arrays):
            variable.assign(value)
        self.restored_step = self.step = int(meta["step"])
        self.epoch_logs = [[int(epoch), dict(logs)] for epoch, logs in meta.get("epoch_logs", [])]
        return self.restored_step

    # -- save -------------------------------------------------------------------

    def _is_writer(self):
        # Under MultiWorkerMirroredStrategy every worker holds the same values;
        # only the chief writes, so workers never race on one file.
        strategy = getattr(self.model, "distribute_strategy", None)
        return getattr(getattr(strategy, "extended", None), "should_checkpoint", True)

    def save(self, epoch=None):
        """Writes the state now (atomically). Returns the path."""
        model = self.model
        variables = self._variables(model)
        step = self.step
        if not self._is_writer():
            self.saved_step = step
            return None
        meta = {
            "format_version": FORMAT_VERSION,
            "step": step,
            "epoch": epoch,
            "fingerprint": self._fingerprint(model),
            "variables": _spec(variables),
            "epoch_logs": self.epoch_logs,
        }
        arrays = {f"v{i}": _to_numpy(v) for i, v in enumerate(variables)}
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)

        def write(tmp):
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())  # on disk before the rename makes it the backup

        with interrupts_deferred():
            write_atomically(self.path, write, suffix=".npz")
        self.saved_step = step
        return self.path

    def on_train_begin(self, logs=None):
        # Leftovers of a save that was killed mid-write; the backup itself is intact.
        if os.path.isdir(self.backup_dir):
            for name in os.listdir(self.backup_dir):
                if name.startswith(".tmp-"):
                    os.remove(os.path.join(self.backup_dir, name))

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start_step = self.step

    def on_train_batch_end(self, batch, logs=None):
        # From `batch`, not a count of calls: with steps_per_execution > 1 Keras calls this once
        # per execution, with the index of its last batch.
        self.step = self._epoch_start_step + batch + 1
        # The epoch's last batch is saved by on_epoch_end, with the epoch's logs.
        if self.save_every and batch + 1 != self.params.get("steps"):
            if self.step % self.save_every == 0 and self.step != self.saved_step:
                self.save()

    def on_epoch_end(self, epoch, logs=None):
        values = {}
        for key, value in (logs or {}).items():
            try:
                values[key] = float(value)
            except (TypeError, ValueError):
                pass  # not a number: nothing a history holds
        self.epoch_logs = [entry for entry in self.epoch_logs if entry[0] != epoch] + [[int(epoch), values]]
        self.save(epoch=epoch)
