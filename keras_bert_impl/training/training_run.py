"""One training run in a run folder: the driver every training command (and a Python user) calls
with a `TrainingSpec`."""

import contextlib
import importlib.util
import os
import sys
import time

import keras

from keras_bert_impl.atomic_write import write_atomically, write_json_atomically
from keras_bert_impl.training.backup_and_restore import BackupAndRestore
from keras_bert_impl.training.best_model_checkpoint import BestModelCheckpoint, InferenceCopies
from keras_bert_impl.training.divergence_guard import DivergenceGuard
from keras_bert_impl.training.epoch_timer import EpochTimer
from keras_bert_impl.training.fit_resumable import fit_resumable
from keras_bert_impl.training.run_folder import RunFolder
from keras_bert_impl.training.training_result import TrainingResult

_HAS_TF = importlib.util.find_spec("tensorflow") is not None


def save_model(model, path, optimizer_state=False, copies=None):
    """Writes the .keras file next to its destination, then renames it into place,
    so a crash never leaves a half-written model at `path`. Without the
    optimizer's state unless asked (a finished model needs only its weights): then the
    file holds `copies(model)` (an `InferenceCopies`; None: a new one)."""
    if not optimizer_state and getattr(model, "optimizer", None) is not None and model.optimizer.built:
        model = (copies or InferenceCopies())(model)
    write_atomically(path, model.save, suffix=".keras", hold_interrupts=True)


def _save_json(data, path):
    write_json_atomically(data, path, indent=2, sort_keys=True)


class TrainingRun:
    """One `TrainingSpec` trained into its run folder, resumable at the exact step after a kill.

    The driver around `fit` that `kbert finetune`, `distill` and `pretrain` share, usable
    from Python without the CLI (`run_training(spec)` is `TrainingRun(spec).run()`). Made,
    it has checked the folder (`RunFolder`: a new run, a resumed one, a finished one left as
    it is, other settings refused with `RunFolderError`); `run()` does the rest in one call:
    the strategy, the data, the seed, dtype policy and strategy scope the model is built in,
    the backup and exact resume (`BackupAndRestore`, `fit_resumable`), the best-epoch
    checkpoint, the TensorBoard logs (where TensorFlow is installed), the atomic saves of
    `model.keras`, `metrics.json` and the spec's other JSON files, and the closing record.

    A run folder holds `run.json` (what made it), `backup/` while it trains, `logs/`,
    `best.keras` (when `best` is given and the best epoch is not the last), `model.keras`
    and `metrics.json`.

    Args:
        spec: `TrainingSpec`.

    Attributes:
        folder: the checked `RunFolder`; `state`: "new", "resume" or "finished".
        strategy: the run's strategy, once `run()` has made it (the spec's `data` gets it).
        chief: whether this process writes the run's files (not a non-chief worker).

    Example:
    >>> from keras_bert_impl.training import TrainingData, TrainingSpec
    >>> x, y = np.ones((8, 3), "float32"), np.zeros((8, 1), "float32")
    >>> def build(data):  # seeded, inside the strategy's scope; compiled here
    ...     model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    ...     model.compile(optimizer="sgd", loss="mse")
    ...     return model
    >>> spec = TrainingSpec(
    ...     output="run", settings={"steps": 4}, save_every=2, verbose=0, model=build,
    ...     data=lambda run: TrainingData(
    ...         dataset_fn=lambda: tf.data.Dataset.from_tensor_slices((x, y)).batch(2),
    ...         epochs=2, steps_per_epoch=2),
    ...     final_metrics=lambda result: {"loss": result.history["loss"][-1]})
    >>> run = TrainingRun(spec)
    >>> run.state, sorted(run.run().metrics), sorted(os.listdir("run")), run.state
    ('new', ['loss'], ['logs', 'metrics.json', 'model.keras', 'run.json'], 'finished')
    """

    def __init__(self, spec):
        self.spec = spec
        self.started = time.monotonic()
        self.folder = RunFolder(
            spec.output,
            spec.command,
            spec.settings,
            spec.inputs,
            overwrite=spec.overwrite,
            keep_backup=spec.keep_backup,
        )
        self.folder.check()
        self.name = spec.name or f"kbert {spec.command}"
        self.strategy = None
        self._started_folder = False
        # The best epoch's model and the final one are saved from one inference copy.
        self._copies = InferenceCopies()

    @property
    def state(self):
        return self.folder.state

    @property
    def chief(self):
        """Whether this process writes the run's files (not a non-chief multi-worker process)."""
        strategy = self.strategy or _DefaultStrategy()
        return getattr(strategy.extended, "should_checkpoint", True)

    def output_path(self, *names):
        """The path of `names` in the run folder, for a file of the spec's own (e.g. records the
        data step builds): a replaced run's files are cleared and this run recorded first."""
        if not self._started_folder:
            self.folder.start(write=self.chief)
            self._started_folder = True
        return os.path.join(self.folder.path, *names)

    def run(self):
        """Trains the run and returns its `TrainingResult` (`metrics`: what metrics.json holds),
        or None when the folder holds this run finished (reported, left as it is)."""
        if self.state == "finished":
            self.folder.report_finished(self.name)
            return None
        spec = self.spec
        strategy = spec.strategy() if callable(spec.strategy) else spec.strategy
        self.strategy = strategy if strategy is not None else _DefaultStrategy()
        data = spec.data(self)
        if spec.dtype_policy is not None:
            keras.config.set_dtype_policy(spec.dtype_policy)
        keras.utils.set_random_seed(spec.seed)
        with self.strategy.scope():
            model = spec.model(data)
        saved = getattr(model, "inference_model", model)
        self.output_path()  # every check passed: a replaced run's files go, this run is recorded
        result = self._fit(model, saved, data)
        result.metrics = spec.final_metrics(result)
        if self.chief:
            save_model(saved, self.output_path("model.keras"), copies=self._copies)
            for name, contents in (spec.files(result) if spec.files else {}).items():
                _save_json(contents, self.output_path(name))
            _save_json(result.metrics, self.output_path("metrics.json"))
        self.folder.finish(result.best_file, write=self.chief)
        return result

    def _callbacks(self, checkpoint):
        # The guard runs before the backup (appended last by fit_resumable): a diverged step is never
        # backed up.
        guard = DivergenceGuard(
            "Lower --learning-rate, then run again with --overwrite (another learning rate is another run)."
        )
        # Keras' TensorBoard callback writes through tf.summary: no logs where TensorFlow is not installed.
        logs = [keras.callbacks.TensorBoard(self.output_path("logs"), update_freq="epoch")] if _HAS_TF else []
        return [*([checkpoint] if checkpoint else []), *logs, EpochTimer(), guard, *self.spec.callbacks]

    def _fit(self, model, saved, data):
        """`fit_resumable` with the run's backup and callbacks: the `TrainingResult`."""
        spec = self.spec
        backup = BackupAndRestore(
            self.output_path("backup"),
            save_every=spec.save_every,
            fingerprint={"model": saved.get_config(), "run": self.folder.settings},
        )
        checkpoint = None
        best = spec.best(data) if callable(spec.best) else spec.best
        if best:
            monitor, mode = best
            checkpoint = BestModelCheckpoint(
                self.output_path("best.keras"),
                monitor=monitor,
                mode=mode,
                save=self.chief,
                final_epoch=data.epochs - 1,
                copies=self._copies,
            )
        callbacks = self._callbacks(checkpoint)
        fit_started = time.monotonic()
        with self.strategy.scope():
            history = fit_resumable(
                model,
                data.dataset_fn,
                epochs=data.epochs,
                steps_per_epoch=data.steps_per_epoch,
                backup=backup,
                validation_data=data.validation,
                callbacks=callbacks,
                verbose=spec.verbose,
            )
        if backup.restored_step:
            print(
                f"{self.name}: resumed from the backup at step {backup.restored_step} of "
                f"{data.epochs * data.steps_per_epoch}",
                file=sys.stderr,
            )
        return TrainingResult(
            history,
            backup.restored_step,
            callbacks,
            checkpoint,
            data.epochs - 1,
            seconds=time.monotonic() - self.started,
            train_seconds=time.monotonic() - fit_started,
            model=saved,
            trained=model,
            data=data,
            settings=self.folder.settings,
        )


def run_training(spec):
    """Trains `spec`'s run (a `TrainingSpec`) in its folder and returns its `TrainingResult`
    (`metrics`: what metrics.json holds; `model`: what model.keras holds), or None when the
    folder already holds this finished run (reported on stderr and left as it is). Raises
    `RunFolderError` for a folder the run must not touch."""
    return TrainingRun(spec).run()


class _DefaultStrategy:
    """Keras' default placement when no tf.distribute strategy is given (any backend)."""

    class extended:
        should_checkpoint = True

    num_replicas_in_sync = 1

    @staticmethod
    def scope():
        return contextlib.nullcontext()
