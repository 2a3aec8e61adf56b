"""Stops a run whose training loss stops being finite, before anything keeps its weights."""

import math

import keras


class DivergenceGuard(keras.callbacks.Callback):
    """Raises FloatingPointError at the first training batch whose loss is NaN or infinite.

    Keras' own TerminateOnNaN only stops `fit`: the run would then save the diverged weights as
    its model and call itself finished. Raised here, the run ends with that error instead. Put
    it before the backup callback (`fit_resumable` appends the backup last), so the last backup
    holds weights from before the divergence.

    Args:
        advice: what the error tells the user to change (e.g. the flags to lower).

    Example:
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, kernel_initializer="ones")])
    >>> model.compile(optimizer=keras.optimizers.SGD(1e30), loss="mse")  # (1e20 - 1)**2 overflows float32
    >>> try:
    ...     model.fit(
    ...         np.ones((64, 1)) * 1e20,
    ...         np.ones((64, 1)),
    ...         batch_size=8,
    ...         callbacks=[DivergenceGuard()],
    ...         verbose=0,
    ...     )
    ... except FloatingPointError as error:
    ...     print(str(error).split(":")[0])
    The training loss became inf at step 1
    """

    def __init__(self, advice="Lower the learning rate, then train again."):
        super().__init__()
        self.advice = advice

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        loss = float(loss)
        if not math.isfinite(loss):
            step = int(self.model.optimizer.iterations.numpy())
            raise FloatingPointError(
                f"The training loss became {loss} at step {step}: the weights diverged, and "
                f"no model was saved from them. {self.advice}"
            )
