"""One load per model file for test modules whose commands only read their models (never train
them): `keras.saving.load_model` of a file already loaded returns that model again."""

import os

import keras


def load_each_file_once(monkeypatch, loaded):
    """Patches `keras.saving.load_model` (for the test that asks, through `monkeypatch`): the
    first load of a file, keyed by its real path, mtime and size, goes to Keras and is kept in
    `loaded` (a dict the caller keeps, e.g. for its module); a later load of the same unchanged
    file returns that model. Only for commands that do not change the model they load: a
    `kbert finetune --init` of the file would train the model the next command gets."""
    real = keras.saving.load_model

    def load(filepath, *args, **kwargs):
        if args or kwargs or not isinstance(filepath, (str, os.PathLike)):
            return real(filepath, *args, **kwargs)
        stat = os.stat(filepath)
        key = (os.path.realpath(filepath), stat.st_mtime_ns, stat.st_size)
        if key not in loaded:
            loaded[key] = real(filepath)
        return loaded[key]

    monkeypatch.setattr(keras.saving, "load_model", load)
