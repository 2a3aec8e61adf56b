"""`model.fit` that resumes an interrupted run at its exact step, data position included."""

import itertools
import sys

import keras
from keras_bert_impl.validation import check_positive_int


def _merge(histories, earlier=()):
    """One History of the epochs `earlier` ([epoch, logs] from a backup) and `histories`."""
    merged = keras.callbacks.History()
    merged.epoch, merged.history = [], {}
    done = {epoch for history in histories for epoch in history.epoch}
    for epoch, logs in earlier:
        if epoch in done:
            continue
        merged.epoch.append(epoch)
        for key, value in logs.items():
            merged.history.setdefault(key, []).append(value)
    for history in histories:
        merged.epoch.extend(history.epoch)
        for key, values in history.history.items():
            merged.history.setdefault(key, []).extend(values)
    if histories:
        merged.set_model(histories[-1].model)
        merged.set_params(histories[-1].params)
    return merged


def _with_stated_length(validation_data):
    """A tf.data validation set of unknown length, counted once and stated.

    Given a dataset whose cardinality it does not know, Keras 3.15's evaluate ends with one
    more step on no data, and the per-output loss metrics of a multi-output model
    (val_mlm_logits_loss, val_nsp_logits_loss) average that step's 0 in with the weight of a
    whole batch: 20 batches of held-out pretraining records read 20/21 of their loss (the
    total val_loss weighs steps by batch size and stays right). A dataset that states its
    length ends cleanly.
    """
    if "tensorflow" not in sys.modules:  # no tf.data.Dataset can exist (the JAX and PyTorch backends)
        return validation_data
    import tensorflow as tf

    if not isinstance(validation_data, tf.data.Dataset):
        return validation_data
    if int(validation_data.cardinality()) != int(tf.data.UNKNOWN_CARDINALITY):
        return validation_data
    count = int(validation_data.reduce(0, lambda n, *_: n + 1))
    return validation_data.apply(tf.data.experimental.assert_cardinality(count))


def _stream(batches, start):
    """The run's batches repeated without end, from batch `start`: a `tf.data.Dataset`'s own
    repeat and skip, or a re-iterable of batches (a list, on any backend) passed over again."""
    if hasattr(batches, "repeat") and hasattr(batches, "skip"):
        return batches.repeat().skip(start)

    def passes():
        while True:
            count = 0
            for batch in batches:
                count += 1
                yield batch
            if count == 0:
                raise ValueError(
                    "dataset_fn() gave no batches (or an iterator already used up): return a tf.data.Dataset "
                    f"or a re-iterable of batches, e.g. a list. Received: {type(batches).__name__}"
                )

    # A generator, as Keras' fit takes one (not any iterator).
    return (batch for batch in itertools.islice(passes(), start, None))


def fit_resumable(
    model,
    dataset_fn,
    epochs,
    steps_per_epoch,
    backup=None,
    validation_data=None,
    callbacks=(),
    verbose="auto",
):
    """Trains `epochs * steps_per_epoch` steps with `model.fit`, resuming from `backup`.

    The data position is the global step: `dataset_fn()` must build a dataset that
    yields the same batches in the same order on every run. It is repeated and the
    batches a restored run already trained on are skipped, so the resumed run sees
    exactly the batches the uninterrupted one would have. An interrupted epoch is
    finished by a first, shorter `fit` call (its metrics cover only the steps after
    the restart), then a freshly built dataset serves the rest.

    Why a function and not a dataset, and why every epoch should be in it: a seeded
    `shuffle(reshuffle_each_iteration=True)` draws each epoch's order from a
    generator owned by the dataset object. A second iterator over the same object
    continues that sequence instead of repeating it, and under a tf.distribute
    strategy's `fit` a freshly built object does not give its k-th epoch the order
    of the uninterrupted run's k-th epoch either. So build all epochs into the
    dataset, each ordered by (seed, epoch) alone: the readers' `read(path,
    epochs=N)` does.

    Args:
        model: a compiled Keras model.
        dataset_fn: callable returning a new `tf.data.Dataset` of the run's
            batches (all epochs, or one epoch that is repeated), in the same order
            each time it is built; or, on any backend, a re-iterable of batches
            (a list of (x, y) tuples), passed over again as often as needed.
        epochs: int.
        steps_per_epoch: int. Steps per Keras epoch (progress summary, validation,
            epoch-end callbacks). It need not be one pass over the data: the
            batches come from one continuous stream of repeated passes.
        backup: `BackupAndRestore` or None. Restored first, then saves as it trains.
        validation_data, callbacks, verbose: as for `model.fit`.

    Returns:
        `keras.callbacks.History` of every epoch of the run: those finished by
        earlier processes (kept in the backup) and those run now. An epoch
        interrupted and finished now counts only its steps after the restart.

    Example:
    >>> from keras_bert_impl.training import BackupAndRestore
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss="mse")
    >>> def dataset_fn():  # the same batches in the same order on every call
    ...     rows = tf.data.Dataset.from_tensor_slices((np.ones((6, 3)), np.zeros((6, 2))))
    ...     return rows.shuffle(6, seed=0).batch(2)
    >>> backup = BackupAndRestore("run")
    >>> fit_resumable(model, dataset_fn, 2, steps_per_epoch=3, backup=backup, verbose=0).epoch
    [0, 1]
    >>> # Run again, as after a crash: the backup is at step 6, so only the third epoch is run now.
    >>> backup = BackupAndRestore("run")
    >>> history = fit_resumable(model, dataset_fn, 3, steps_per_epoch=3, backup=backup, verbose=0)
    >>> history.epoch, len(history.history["loss"])
    ([0, 1, 2], 3)
    """
    epochs = check_positive_int("epochs", epochs)
    steps_per_epoch = check_positive_int("steps_per_epoch", steps_per_epoch)
    callbacks = list(callbacks)
    start = 0
    if backup is not None:
        start = backup.restore(model)
        callbacks.append(backup)
    total = epochs * steps_per_epoch
    if start > total:
        raise ValueError(
            f"The backup is at step {start}, past the {total} steps asked for (epochs={epochs} x "
            f"steps_per_epoch={steps_per_epoch}): this run was started with other settings. Resume with "
            "those, or use a new output folder."
        )
    earlier = list(backup.epoch_logs) if backup is not None else []
    if start == total:
        return _merge([], earlier)
    # Skipped before the model sees anything: the stream restarts at batch `start`.
    if not callable(dataset_fn):
        raise ValueError(
            "dataset_fn must be a function that builds the one-epoch tf.data.Dataset (or list of batches), "
            "e.g. "
            f"lambda: reader.read(path). Received: {dataset_fn!r}"
        )
    stream = _stream(dataset_fn(), start)
    epoch, offset = divmod(start, steps_per_epoch)
    histories = []
    # shuffle=False: the order is the dataset's own (Keras ignores it for datasets, with a warning).
    common = dict(
        validation_data=_with_stated_length(validation_data),
        callbacks=callbacks,
        verbose=verbose,
        shuffle=False,
    )
    if offset:
        histories.append(
            model.fit(
                stream,
                initial_epoch=epoch,
                epochs=epoch + 1,
                steps_per_epoch=steps_per_epoch - offset,
                **common,
            )
        )
        epoch += 1
        stream = _stream(dataset_fn(), epoch * steps_per_epoch)
    if epoch < epochs:
        histories.append(
            model.fit(stream, initial_epoch=epoch, epochs=epochs, steps_per_epoch=steps_per_epoch, **common)
        )
    return _merge(histories, earlier)
