"""What a training run hands its final-metrics function."""

from keras_bert_impl.training.epoch_timer import EpochTimer
from keras_bert_impl.training.run_folder import RunFolder


class TrainingResult:
    """What `TrainingRun.run` hands its final-metrics function.

    Attributes:
        history: dict of metric -> one float per epoch (earlier processes' epochs included).
        resumed_from_step: int. The backup's step this process started at (0: from scratch).
        epoch_train_seconds: list of the training seconds of each epoch run by this process.
        best: {"monitor", "value", "epoch", "file"} of the best epoch, or None without `best`.
        best_file: "best.keras", "model.keras" (the best epoch is the last) or None.
        seconds: float. Since the `TrainingRun` was made; train_seconds: in `fit` alone.
        model: the trained model model.keras holds (a `Distiller`'s student).
        trained: the model `fit` trained (the `Distiller` itself; else `model`).
        data: the run's `TrainingData` (the spec's `data` returned it).
        settings: the settings run.json records (the spec's).
        metrics: what metrics.json holds, once the final metrics are computed (None before).
    """

    def __init__(
        self,
        history,
        resumed_from_step,
        callbacks,
        checkpoint,
        last_epoch,
        seconds,
        train_seconds,
        model=None,
        data=None,
        settings=None,
        trained=None,
    ):
        self.history = {k: [float(v) for v in values] for k, values in history.history.items()}
        self.resumed_from_step = resumed_from_step
        self.epoch_train_seconds = [
            round(s, 3) for c in callbacks if isinstance(c, EpochTimer) for s in c.seconds
        ]
        self.best_file = RunFolder.best_file(checkpoint.best_epoch, last_epoch) if checkpoint else None
        self.best = (
            None
            if checkpoint is None
            else {
                "monitor": checkpoint.monitor,
                "value": checkpoint.best,
                "epoch": checkpoint.best_epoch,
                "file": self.best_file,
            }
        )
        self.seconds = seconds
        self.train_seconds = train_seconds
        self.model = model
        self.trained = model if trained is None else trained
        self.data = data
        self.settings = settings
        self.metrics = None
