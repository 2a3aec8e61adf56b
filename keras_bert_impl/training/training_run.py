"""One training run in a run folder: the driver every training command (and a Python user) calls."""

import contextlib
import os
import sys
import time

import keras

from keras_bert_impl.atomic_write import write_atomically, write_json_atomically
from keras_bert_impl.training.backup_and_restore import BackupAndRestore
from keras_bert_impl.training.best_model_checkpoint import BestModelCheckpoint, inference_copy
from keras_bert_impl.training.divergence_guard import DivergenceGuard
from keras_bert_impl.training.epoch_timer import EpochTimer
from keras_bert_impl.training.fit_resumable import fit_resumable
from keras_bert_impl.training.run_folder import RunFolder
from keras_bert_impl.training.training_result import TrainingResult


def save_model(model, path, optimizer_state=False):
    """Writes the .keras file next to its destination, then renames it into place,
    so a crash never leaves a half-written model at `path`. Without the
    optimizer's state unless asked (a finished model needs only its weights)."""
    if not optimizer_state and getattr(model, "optimizer", None) is not None and model.optimizer.built:
        model = inference_copy(model)
    write_atomically(path, model.save, suffix=".keras", hold_interrupts=True)


def _save_json(data, path):
    write_json_atomically(data, path, indent=2, sort_keys=True)


class TrainingRun:
    """A model trained into a run folder, resumable at the exact step after a kill.

    The driver around `fit` that `kbert finetune`, `distill` and `pretrain` share, usable
    from Python without the CLI. It owns what every run does around its model: the folder's
    rules (`RunFolder`: a new run, a resumed one, a finished one left as it is, other
    settings refused), the seed and the strategy scope the model is built in, the backup
    and exact resume (`BackupAndRestore`, `fit_resumable`), the best-epoch checkpoint, the
    TensorBoard logs, the atomic saves of `model.keras`, `metrics.json` and any other JSON
    file, and the closing record. The caller brings the model builder (it compiles the
    model), the datasets and the final metrics.

    A run folder holds `run.json` (what made it), `backup/` while it trains, `logs/`,
    `best.keras` (when a `best` metric is given and the best epoch is not the last),
    `model.keras` and `metrics.json`.

    Args:
        folder: `RunFolder`, or the folder's path (then `command`, `settings` and `inputs`
            make the `RunFolder`). It is checked at once: `state` is "new", "resume" or
            "finished"; a folder this run must not touch raises `RunFolderError`.
        command, settings, inputs, overwrite, keep_backup: as for `RunFolder`, when
            `folder` is a path.
        strategy: a `tf.distribute.Strategy`, or None for Keras' default (one device).
        seed: int. `keras.utils.set_random_seed` before the model is built.
        save_every: int. Steps between backups (and at each epoch end).
        verbose: `fit`'s verbose.
        name: str. The prefix of the lines the run prints (default "kbert COMMAND").

    Example:
    >>> x, y = np.ones((8, 3), "float32"), np.zeros((8, 1), "float32")
    >>> def build():  # built, seeded, inside the strategy's scope; compiled by the caller
    ...     model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    ...     model.compile(optimizer="sgd", loss="mse")
    ...     return model
    >>> run = TrainingRun("run", command="train", settings={"steps": 4}, save_every=2, verbose=0)
    >>> model = run.build(build)
    >>> dataset_fn = lambda: tf.data.Dataset.from_tensor_slices((x, y)).batch(2)
    >>> metrics = run.train(model, dataset_fn, epochs=2, steps_per_epoch=2,
    ...                     final_metrics=lambda result: {"loss": result.history["loss"][-1]})
    >>> sorted(os.listdir("run")), run.state
    (['logs', 'metrics.json', 'model.keras', 'run.json'], 'finished')
    """

    def __init__(
        self,
        folder,
        command=None,
        settings=None,
        inputs=None,
        overwrite=False,
        keep_backup=False,
        strategy=None,
        seed=0,
        save_every=200,
        verbose="auto",
        name=None,
    ):
        if not isinstance(folder, RunFolder):
            if command is None or settings is None:
                raise ValueError(
                    "A TrainingRun given a path needs command= and settings= to record the run "
                    f"(or give a RunFolder). Received: command={command!r}, settings={settings!r}"
                )
            folder = RunFolder(
                folder, command, settings, inputs, overwrite=overwrite, keep_backup=keep_backup
            )
        self.folder = folder
        self.output = folder.path
        if folder.state is None:
            folder.check()
        self.strategy = strategy if strategy is not None else _DefaultStrategy()
        self.seed = seed
        self.save_every = save_every
        self.verbose = verbose
        self.name = name or f"kbert {folder.command}"
        self.started = time.monotonic()
        self._started_folder = False

    @property
    def state(self):
        return self.folder.state

    @property
    def finished(self):
        return self.folder.state == "finished"

    @property
    def chief(self):
        """Whether this process writes the run's files (not a non-chief multi-worker process)."""
        return getattr(self.strategy.extended, "should_checkpoint", True)

    def report_finished(self):
        self.folder.report_finished(self.name)

    def path(self, *names):
        return os.path.join(self.output, *names)

    def start(self):
        """Clears a replaced run's files and records this one (once; the chief only). `train`
        calls it; call it first to write files of your own into the folder before training."""
        if not self._started_folder:
            self.folder.start(write=self.chief)
            self._started_folder = True

    def build(self, builder):
        """`builder()` after seeding, inside the strategy's scope: the model, compiled."""
        keras.utils.set_random_seed(self.seed)
        with self.strategy.scope():
            return builder()

    def train(
        self,
        model,
        dataset_fn,
        epochs,
        steps_per_epoch,
        final_metrics,
        validation_data=None,
        saved=None,
        settings=None,
        best=None,
        files=None,
        callbacks=(),
    ):
        """Trains `model` (resuming from the folder's backup), then writes `saved` to
        model.keras, `files` and `final_metrics(result)` to metrics.json, and closes the run.

        Args:
            model: the compiled model `fit` trains (from `build`).
            dataset_fn, epochs, steps_per_epoch, validation_data: as for `fit_resumable`.
            final_metrics: callable(`TrainingResult`) -> dict, written to metrics.json.
            saved: the model written to model.keras (default `model`; e.g. a distiller's student).
            settings: dict of what the run computes with; a backup made by other settings (or
                another model config) is refused. Default: the folder's settings.
            best: (monitor, mode), e.g. ("val_accuracy", "max"): keep the best epoch's model.
            files: dict of file name -> dict, more JSON files written beside model.keras.
            callbacks: more Keras callbacks for `fit`.

        Returns:
            The metrics dict written to metrics.json.
        """
        saved = model if saved is None else saved
        self.start()
        backup = BackupAndRestore(
            self.path("backup"),
            save_every=self.save_every,
            fingerprint={
                "model": saved.get_config(),
                "run": self.folder.settings if settings is None else settings,
            },
        )
        checkpoint = (
            BestModelCheckpoint(self.path("best.keras"), monitor=best[0], mode=best[1], save=self.chief)
            if best
            else None
        )
        # The guard runs before the backup (appended last by fit_resumable): a diverged step is never backed up.
        guard = DivergenceGuard(
            "Lower --learning-rate, then run again with --overwrite (another learning rate is another run)."
        )
        callbacks = [
            *([checkpoint] if checkpoint else []),
            keras.callbacks.TensorBoard(self.path("logs"), update_freq="epoch"),
            EpochTimer(),
            guard,
            *callbacks,
        ]
        fit_started = time.monotonic()
        with self.strategy.scope():
            history = fit_resumable(
                model,
                dataset_fn,
                epochs=epochs,
                steps_per_epoch=steps_per_epoch,
                backup=backup,
                validation_data=validation_data,
                callbacks=callbacks,
                verbose=self.verbose,
            )
        if backup.restored_step:
            print(
                f"{self.name}: resumed from the backup at step {backup.restored_step} of {epochs * steps_per_epoch}",
                file=sys.stderr,
            )
        result = TrainingResult(
            history,
            backup.restored_step,
            callbacks,
            checkpoint,
            epochs - 1,
            seconds=time.monotonic() - self.started,
            train_seconds=time.monotonic() - fit_started,
        )
        metrics = final_metrics(result)
        if self.chief:
            save_model(saved, self.path("model.keras"))
            for name, data in (files or {}).items():
                _save_json(data, self.path(name))
            _save_json(metrics, self.path("metrics.json"))
        self.folder.finish(result.best_file, write=self.chief)
        return metrics


class _DefaultStrategy:
    """Keras' default placement when no tf.distribute strategy is given (any backend)."""

    class extended:
        should_checkpoint = True

    num_replicas_in_sync = 1

    @staticmethod
    def scope():
        return contextlib.nullcontext()
