"""Keeps the best model so far (by a validation metric) as a .keras file, written atomically."""

import json
import math
import os

import keras

from keras_bert_impl.atomic_write import write_atomically, write_json_atomically
from keras_bert_impl.models.model_copy import computes_in, copy_vocabulary, rebuilt


def inference_copy(model):
    """The model with the same weights and vocabulary but without the optimizer's state.

    A `.keras` file of a compiled, trained model holds the optimizer variables too
    (Adam's two moments: three times the weights). A finished model needs only the
    weights; the copy is rebuilt from the config, so it compiles itself afresh. A model
    trained under a mixed policy (--precision fp16 or bf16) is copied computing in float32,
    as every model file of the library is: the precision it runs at is chosen when it runs.
    """
    # A wrapper that trains another model (the Distiller's student) names what it saves.
    model = getattr(model, "inference_model", model)
    return rebuilt(model, None if computes_in(model) == {"float32"} else "float32")


class InferenceCopies:
    """`inference_copy` for the saves of one training run: the copy is built at the first call
    and given the model's current weights at each later one (a new copy only when the model's
    config or dtypes changed), where each save built one: a BertBackbone is a second or more to
    build, and a run saves its best epoch's model and its final one from the same model.

    Example:
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> _ = model.fit(np.ones((8, 4)), np.ones((8, 1)), verbose=0)
    >>> copies = InferenceCopies()
    >>> first = copies(model)
    >>> _ = model.fit(np.ones((8, 4)), np.ones((8, 1)), verbose=0)
    >>> second = copies(model)
    >>> second is first, np.array_equal(second.get_weights()[0], model.get_weights()[0])
    (True, True)
    """

    def __init__(self):
        self._copy = self._source = self._made_from = None

    def __call__(self, model):
        source = getattr(model, "inference_model", model)
        made_from = (
            json.dumps(source.get_config(), sort_keys=True, default=str),
            sorted(computes_in(source)),
        )
        if self._copy is None or source is not self._source or made_from != self._made_from:
            self._copy, self._source, self._made_from = inference_copy(source), source, made_from
        else:
            self._copy.set_weights(source.get_weights())
            copy_vocabulary(source, self._copy)
        return self._copy


class BestModelCheckpoint(keras.callbacks.Callback):
    """Saves the whole model to `path` at each epoch end where `monitor` improves.

    The file holds the weights without the optimizer state (`inference_copy`).
    Unlike `keras.callbacks.ModelCheckpoint`, the file is written beside its
    destination and renamed into place (a kill never leaves a torn best model),
    and the best score is kept in `path + ".json"`, so a run resumed from a
    backup keeps comparing against the best of the earlier process instead of
    overwriting it with a worse epoch.

    Args:
        path: str. The .keras file to write.
        monitor: str. A key of the epoch logs, e.g. "val_accuracy" or "val_loss".
        mode: "max" or "min".
        save: bool or None. Whether this process writes (False on non-chief workers).
        final_epoch: int or None. The last epoch of a run that saves its final model itself
            (`TrainingRun`: model.keras, which `RunFolder.best_file` then names as the best):
            when it improves, only the score is written and an earlier best.keras is removed.
        copies: `InferenceCopies` or None. Where the copies to save come from (`TrainingRun`
            shares one with its final save); None: the callback's own.

    Example:
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> best = BestModelCheckpoint("run/best.keras", monitor="val_loss", mode="min")
    >>> x, y = np.ones((8, 4)), np.ones((8, 1))
    >>> _ = model.fit(x, y, validation_split=0.25, epochs=3, callbacks=[best], verbose=0)
    >>> best.best_epoch, sorted(os.listdir("run"))  # the model of the lowest val_loss, and that score
    (2, ['best.keras', 'best.keras.json'])
    """

    def __init__(self, path, monitor="val_loss", mode="min", save=True, final_epoch=None, copies=None):
        super().__init__()
        if not str(path).endswith(".keras"):
            raise ValueError(f"path must end in .keras. Received: path={path!r}")
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min'. Received: mode={mode!r}")
        self.path = os.fspath(path)
        self.monitor = monitor
        self.mode = mode
        self.save = save
        self.final_epoch = final_epoch
        self.copies = copies if copies is not None else InferenceCopies()
        self.best = None
        self.best_epoch = None
        score_path = self.path + ".json"
        if os.path.exists(score_path):
            with open(score_path, encoding="utf-8") as f:
                stored = json.load(f)
            if stored.get("monitor") == monitor:
                self.best, self.best_epoch = stored["value"], stored["epoch"]

    def _better(self, value):
        if value is None or math.isnan(value):
            return False
        if self.best is None:
            return True
        return value > self.best if self.mode == "max" else value < self.best

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            raise ValueError(
                f"BestModelCheckpoint monitors {self.monitor!r}, which the epoch logs lack (they have "
                f"{sorted(logs or {})}). Pass validation data, or monitor one of those keys."
            )
        value = float(value)
        if not self._better(value):
            return
        self.best, self.best_epoch = value, epoch
        if not self.save:
            return
        score = {"monitor": self.monitor, "mode": self.mode, "value": value, "epoch": epoch}
        if epoch == self.final_epoch:
            # The score first: a process killed between the two leaves a score naming the final
            # epoch beside an older best.keras, which the run's finish removes; never a best.keras
            # missing beside a score that names it.
            write_json_atomically(score, self.path + ".json")
            if os.path.exists(self.path):
                os.remove(self.path)
            return
        write_atomically(self.path, self.copies(self.model).save, suffix=".keras", hold_interrupts=True)
        write_json_atomically(score, self.path + ".json")
