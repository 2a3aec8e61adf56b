"""What a training run hands its final-metrics function."""

from keras_bert_impl.training.epoch_timer import EpochTimer
from keras_bert_impl.training.run_folder import RunFolder


class TrainingResult:
    """What `TrainingRun.train` hands its final-metrics function.

    Attributes:
        history: dict of metric -> one float per epoch (earlier processes' epochs included).
        resumed_from_step: int. The backup's step this process started at (0: from scratch).
        epoch_train_seconds: list of the training seconds of each epoch run by this process.
        best: {"monitor", "value", "epoch", "file"} of the best epoch, or None without `best`.
        best_file: "best.keras", "model.keras" (the best epoch is the last) or None.
        seconds: float. Since the `TrainingRun` was made; train_seconds: in `fit` alone.
    """

    def __init__(self, history, resumed_from_step, callbacks, checkpoint, last_epoch, seconds, train_seconds):
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
