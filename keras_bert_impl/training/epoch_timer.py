"""Wall time of each epoch's training steps, for run reports and benches."""

import time

import keras


class EpochTimer(keras.callbacks.Callback):
    """Records `seconds[i]`: wall seconds of epoch i's training steps, validation excluded.

    Example:
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> timer = EpochTimer()
    >>> _ = model.fit(
    ...     np.ones((8, 4)), np.ones((8, 1)), validation_split=0.25, epochs=3, callbacks=[timer], verbose=0
    ... )
    >>> len(timer.seconds), all(s > 0 for s in timer.seconds)
    (3, True)
    """

    def __init__(self):
        super().__init__()
        self.seconds = []
        self._start = None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def _stop(self):
        if self._start is not None:
            self.seconds.append(time.perf_counter() - self._start)
            self._start = None

    def on_test_begin(self, logs=None):
        # fit validates at the end of the epoch: stop the clock before it.
        self._stop()

    def on_epoch_end(self, epoch, logs=None):
        self._stop()
