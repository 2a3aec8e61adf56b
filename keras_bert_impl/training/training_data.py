"""What a training run reads: its batches, how many steps, and its validation set."""

import dataclasses
from typing import Any, Callable


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingData:
    """The data of one training run, as a `TrainingSpec`'s `data` function returns it.

    A command's data with more in it (readers, label names) is its own dataclass with these
    four fields and those: its model builder and final metrics read them.

    Args:
        dataset_fn: callable returning the run's batches anew, in the same order each time:
            a `tf.data.Dataset` (all epochs, or one that is repeated) or, on any backend, a
            re-iterable of batches such as a list of (x, y) tuples (see `fit_resumable`).
        epochs: int. Keras epochs of the run.
        steps_per_epoch: int. Steps per epoch.
        validation: what `fit` gets as `validation_data`, or None.

    Example:
    >>> batches = [(np.ones((2, 3)), np.zeros((2, 1)))]
    >>> data = TrainingData(dataset_fn=lambda: batches, epochs=2, steps_per_epoch=1)
    >>> data.epochs * data.steps_per_epoch
    2
    """

    dataset_fn: Callable[[], Any]
    epochs: int
    steps_per_epoch: int
    validation: Any = None
