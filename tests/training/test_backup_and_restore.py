"""Backups: exact resume mid-epoch (weights, optimizer, dropout, data position), and
clear errors for a corrupt backup or one of another model."""

import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl.training import create_optimizer
from keras_bert_impl.training.backup_and_restore import STATE_FILE, BackupAndRestore, BackupError
from keras_bert_impl.training.best_model_checkpoint import BestModelCheckpoint
from keras_bert_impl.training.fit_resumable import fit_resumable

EPOCHS, STEPS = 2, 5


def _model(hidden_dim=16, dropout=0.1):
    keras.utils.set_random_seed(0)
    # One block: what a resume must restore (weights, Adam's moments, the dropout seeds, the data
    # position) is the same in every block, and each fit traces each block once.
    backbone = kb.BertBackbone(
        vocabulary_size=50,
        num_layers=1,
        num_heads=2,
        hidden_dim=hidden_dim,
        intermediate_dim=32,
        max_sequence_length=16,
        dropout=dropout,
    )
    model = kb.BertClassifier(backbone, num_classes=2, dropout=dropout)
    model.compile(
        optimizer=create_optimizer(1e-3, train_steps=EPOCHS * STEPS),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def _dataset():
    rng = np.random.default_rng(0)
    x = {
        "token_ids": rng.integers(1, 50, (40, 8)).astype("int32"),
        "segment_ids": np.zeros((40, 8), "int32"),
        "padding_mask": np.ones((40, 8), "int32"),
    }
    y = rng.integers(0, 2, 40)
    # Seeded, reshuffled every epoch: each epoch its own order, the same on every run.
    return (
        tf.data.Dataset.from_tensor_slices((x, y)).shuffle(40, seed=1, reshuffle_each_iteration=True).batch(8)
    )


class _Interrupt(keras.callbacks.Callback):
    """Stands in for a crash: stops the process's training after `step` optimizer steps."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == self.step:
            raise KeyboardInterrupt


@pytest.fixture(scope="module")
def uninterrupted():
    """(weights, history) of the run without a backup that both resume tests compare with."""
    model = _model()
    history = fit_resumable(model, _dataset, epochs=EPOCHS, steps_per_epoch=STEPS, verbose=0)
    return model.get_weights(), history.history


def _trained_backup(folder, epochs, **options):
    """The weights of `_model()` trained `epochs` epochs with a backup in `folder`."""
    model = _model()
    backup = BackupAndRestore(folder, **options)
    fit_resumable(model, _dataset, epochs=epochs, steps_per_epoch=STEPS, backup=backup, verbose=0)
    return model.get_weights()


@pytest.fixture(scope="module")
def one_epoch_backup(tmp_path_factory):
    """A backup folder after one epoch, trained once for the tests that damage it or train on from
    it; each takes a copy (`_copy`)."""
    folder = tmp_path_factory.mktemp("one_epoch")
    _trained_backup(folder, 1)
    return folder


@pytest.fixture(scope="module")
def finished_backup(tmp_path_factory):
    """(folder, weights) of a run trained to its end (EPOCHS epochs) with a backup, trained once for
    the tests that rerun it; each takes a copy (`_copy`)."""
    folder = tmp_path_factory.mktemp("finished")
    return folder, _trained_backup(folder, EPOCHS)


def _copy(folder, tmp_path):
    target = tmp_path / "backup"
    shutil.copytree(folder, target)
    return target


@pytest.mark.parametrize("stop_at", [3, 7])  # inside epoch 0 (then a whole epoch 1), inside epoch 1
@pytest.mark.slow  # about 20 s or more: an interrupted and a resumed run (and the shared uninterrupted one)
def test_resume_mid_epoch_is_exact(tmp_path, stop_at, uninterrupted):
    reference, reference_history = uninterrupted
    backup_dir = tmp_path / "backup"
    model = _model()
    with pytest.raises(KeyboardInterrupt):
        fit_resumable(
            model,
            _dataset,
            epochs=EPOCHS,
            steps_per_epoch=STEPS,
            backup=BackupAndRestore(backup_dir, save_every=2),
            callbacks=[_Interrupt(stop_at)],
            verbose=0,
        )
    resumed = _model()  # a fresh process would build the model anew, with the same seed
    backup = BackupAndRestore(backup_dir, save_every=2)
    history = fit_resumable(resumed, _dataset, epochs=EPOCHS, steps_per_epoch=STEPS, backup=backup, verbose=0)
    assert backup.restored_step == stop_at - stop_at % 2  # the last multiple of save_every
    assert int(resumed.optimizer.iterations.numpy()) == EPOCHS * STEPS
    # The history covers the whole run: epochs the first process finished come from the backup.
    assert history.epoch == list(range(EPOCHS))
    interrupted_epoch = stop_at // STEPS  # its logs count only the steps after the restart
    for epoch in range(EPOCHS):
        if epoch != interrupted_epoch:
            assert history.history["loss"][epoch] == pytest.approx(reference_history["loss"][epoch], rel=1e-6)
            assert history.history["accuracy"][epoch] == reference_history["accuracy"][epoch]
    # Dropout is on (0.1): equal weights mean the same batches, dropout masks and Adam state.
    for a, b in zip(reference, resumed.get_weights()):
        np.testing.assert_array_equal(a, b)


class _InterruptAtBatch(keras.callbacks.Callback):
    """A crash after `count` training batches, however many updates the optimizer applied."""

    def __init__(self, count):
        super().__init__()
        self.count, self.seen = count, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.count:
            raise KeyboardInterrupt


def _fp16_model():
    model = _model()
    # A first loss scale so large that the first batches' gradients overflow float16: the
    # LossScaleOptimizer skips those updates (and halves the scale), so its `iterations` falls
    # behind the batches trained.
    optimizer = keras.optimizers.LossScaleOptimizer(
        create_optimizer(1e-3, train_steps=EPOCHS * STEPS), initial_scale=2.0**24
    )
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.slow  # about 20 s or more: an uninterrupted, an interrupted and a resumed run
def test_fp16_resume_counts_the_batches_whose_updates_were_skipped(tmp_path):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        reference = _fp16_model()
        fit_resumable(reference, _dataset, epochs=EPOCHS, steps_per_epoch=STEPS, verbose=0)
        skipped = EPOCHS * STEPS - int(reference.optimizer.iterations.numpy())
        assert skipped > 0, "the test needs updates skipped for overflow"
        print(f"{skipped} of {EPOCHS * STEPS} updates skipped")
        model = _fp16_model()
        with pytest.raises(KeyboardInterrupt):
            fit_resumable(
                model,
                _dataset,
                epochs=EPOCHS,
                steps_per_epoch=STEPS,
                backup=BackupAndRestore(tmp_path, save_every=2),
                callbacks=[_InterruptAtBatch(7)],
                verbose=0,
            )
        resumed = _fp16_model()
        backup = BackupAndRestore(tmp_path, save_every=2)
        fit_resumable(resumed, _dataset, epochs=EPOCHS, steps_per_epoch=STEPS, backup=backup, verbose=0)
    finally:
        keras.config.set_dtype_policy(previous)
    assert backup.restored_step == 6  # batches, not the optimizer's applied updates
    assert int(resumed.optimizer.iterations.numpy()) == EPOCHS * STEPS - skipped
    for a, b in zip(reference.get_weights(), resumed.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # about 20 s or more: reruns a finished run (`finished_backup`, trained for it)
def test_finished_run_does_nothing(tmp_path, finished_backup):
    folder, weights = finished_backup
    backup_dir = _copy(folder, tmp_path)
    again = _model()
    history = fit_resumable(
        again, _dataset, epochs=EPOCHS, steps_per_epoch=STEPS, backup=BackupAndRestore(backup_dir), verbose=0
    )
    assert history.epoch == [0, 1]  # from the backup; no step was run
    assert int(again.optimizer.iterations.numpy()) == EPOCHS * STEPS
    for a, b in zip(weights, again.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # about 20 s or more: resumes a finished run (`finished_backup`) with fewer steps
def test_backup_past_the_requested_steps_is_an_error(tmp_path, finished_backup):
    backup_dir = _copy(finished_backup[0], tmp_path)
    with pytest.raises(ValueError, match=r"backup is at step 10, past the 5 steps"):
        fit_resumable(
            _model(),
            _dataset,
            epochs=1,
            steps_per_epoch=STEPS,
            backup=BackupAndRestore(backup_dir),
            verbose=0,
        )


@pytest.mark.slow  # about 20 s or more: corrupts a backup (`one_epoch_backup`) and resumes
def test_corrupt_backup_is_an_error_not_a_fresh_start(tmp_path, one_epoch_backup):
    backup_dir = _copy(one_epoch_backup, tmp_path)
    path = backup_dir / STATE_FILE
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a torn file, as a disk failure would leave
    model = _model()
    with pytest.raises(
        BackupError, match=r"is corrupt and cannot be read .*delete that folder to start over"
    ):
        fit_resumable(
            model,
            _dataset,
            epochs=EPOCHS,
            steps_per_epoch=STEPS,
            backup=BackupAndRestore(backup_dir),
            verbose=0,
        )
    assert int(model.optimizer.iterations.numpy()) == 0  # nothing trained


@pytest.mark.slow  # about 20 s or more: resumes a backup (`one_epoch_backup`) into another model
def test_backup_of_another_model_is_an_error(tmp_path, one_epoch_backup):
    backup_dir = _copy(one_epoch_backup, tmp_path)
    with pytest.raises(BackupError, match=r"another model .*hidden_dim: backup 16, now 32"):
        fit_resumable(
            _model(hidden_dim=32),
            _dataset,
            epochs=1,
            steps_per_epoch=STEPS,
            backup=BackupAndRestore(backup_dir),
            verbose=0,
        )


@pytest.mark.slow  # about 20 s or more: trains, then reruns with other settings
def test_other_run_settings_are_an_error(tmp_path):
    fit_resumable(
        _model(),
        _dataset,
        epochs=1,
        steps_per_epoch=STEPS,
        backup=BackupAndRestore(tmp_path, fingerprint={"learning_rate": 1e-3}),
        verbose=0,
    )
    with pytest.raises(BackupError, match=r"learning_rate: backup 0.001, now 0.0005"):
        BackupAndRestore(tmp_path, fingerprint={"learning_rate": 5e-4}).restore(_model())


def test_folder_with_other_files_is_an_error(tmp_path):
    (tmp_path / "notes.txt").write_text("not a backup")
    with pytest.raises(BackupError, match=r"holds files but no training_state.npz"):
        BackupAndRestore(tmp_path).restore(_model())


@pytest.mark.slow  # about 20 s or more: resumes a backup (`one_epoch_backup`) beside a torn write
def test_leftover_partial_write_is_ignored(tmp_path, one_epoch_backup):
    backup_dir = _copy(one_epoch_backup, tmp_path)
    (backup_dir / ".tmp-killed-mid-write.npz").write_bytes(b"PK\x03\x04 torn")
    backup = BackupAndRestore(backup_dir)
    fit_resumable(_model(), _dataset, epochs=EPOCHS, steps_per_epoch=STEPS, backup=backup, verbose=0)
    assert backup.restored_step == STEPS
    assert sorted(os.listdir(backup_dir)) == [STATE_FILE]


def test_bad_arguments_are_named():
    with pytest.raises(
        ValueError, match=r"save_every must be a positive integer or None. Received: save_every=0"
    ):
        BackupAndRestore("x", save_every=0)
    with pytest.raises(ValueError, match=r"dataset_fn must be a function"):
        fit_resumable(_model(), _dataset(), epochs=1, steps_per_epoch=STEPS)
    with pytest.raises(
        ValueError, match=r"steps_per_epoch must be a positive integer. Received: steps_per_epoch=0"
    ):
        fit_resumable(_model(), _dataset, epochs=1, steps_per_epoch=0)


def test_best_model_checkpoint_keeps_the_best_across_processes(tmp_path):
    path = tmp_path / "best.keras"
    model = _model()
    best = BestModelCheckpoint(path, monitor="val_accuracy", mode="max")
    best.set_model(model)
    best.on_epoch_end(0, {"val_accuracy": 0.6})
    saved = os.path.getmtime(path)
    # A resumed process reads the score back and does not overwrite with a worse epoch.
    again = BestModelCheckpoint(path, monitor="val_accuracy", mode="max")
    again.set_model(model)
    assert again.best == 0.6
    again.on_epoch_end(1, {"val_accuracy": 0.55})
    assert os.path.getmtime(path) == saved
    reloaded = keras.saving.load_model(path)
    # Saved without the optimizer's moments: the weights only.
    assert not reloaded.optimizer.built
    with pytest.raises(ValueError, match=r"monitors 'val_accuracy', which the epoch logs lack"):
        again.on_epoch_end(2, {"loss": 0.1})


def test_validation_of_unknown_length_reports_true_per_output_losses():
    # Records read from TFRecord files have no known length; Keras 3.15 alone would average
    # one extra, empty step into val_mlm_logits_loss and val_nsp_logits_loss (8/9 of their
    # value here), while val_loss stayed right.
    rng = np.random.default_rng(0)
    n = 64
    x = {
        "token_ids": rng.integers(5, 50, (n, 8)).astype("int32"),
        "segment_ids": np.zeros((n, 8), "int32"),
        "padding_mask": np.ones((n, 8), "int32"),
        "mask_positions": rng.integers(1, 8, (n, 4)).astype("int32"),
    }
    y = {"mlm_logits": rng.integers(5, 50, (n, 4)), "nsp_logits": rng.integers(0, 2, n)}
    w = {"mlm_logits": (rng.random((n, 4)) < 0.5).astype("float32"), "nsp_logits": np.ones(n, "float32")}
    data = tf.data.Dataset.from_tensor_slices((x, y, w)).batch(8)
    validation = data.filter(lambda *_: True)  # the same 8 batches, length unknown
    assert int(validation.cardinality()) == int(tf.data.UNKNOWN_CARDINALITY)
    keras.utils.set_random_seed(0)
    model = kb.BertPretrainer(
        kb.BertBackbone(
            vocabulary_size=50,
            num_layers=1,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=16,
            dropout=0.0,
        )
    )
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=model.loss)  # lr 0: the weights stay put
    history = fit_resumable(
        model, lambda: data, epochs=1, steps_per_epoch=8, validation_data=validation, verbose=0
    ).history
    # Per batch, straight from the losses (every batch holds 8 examples, so the plain mean).
    parts = {"mlm_logits": [], "nsp_logits": []}
    for xb, yb, wb in data:
        out = model(xb, training=False)
        for key in parts:
            parts[key].append(float(model.loss[key](yb[key], out[key], wb[key])))
    for key, values in parts.items():
        np.testing.assert_allclose(history[f"val_{key}_loss"][0], np.mean(values), rtol=1e-5)
    np.testing.assert_allclose(
        history["val_loss"][0],
        history["val_mlm_logits_loss"][0] + history["val_nsp_logits_loss"][0],
        rtol=1e-5,
    )


def test_a_ctrl_c_during_a_backup_write_lands_after_it():
    """A SIGINT inside np.savez's zip writer would surface as zipfile's ValueError (a fresh-clone
    run's Ctrl-C test saw exit 1 and a traceback): the save holds it until the file is whole."""
    import signal

    from keras_bert_impl.atomic_write import interrupts_deferred

    # Python's own handler, as in a terminal (a suite started with `&` may inherit SIGINT ignored).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    steps = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                steps.append("the write went on")
        assert steps == ["the write went on"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
