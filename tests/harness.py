"""Shared test helpers: the checks every layer and model goes through."""

import os
import tempfile

import keras
import numpy as np


def tiny_backbone_config(**overrides):
    config = dict(
        vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16
    )
    config.update(overrides)
    return config


def random_inputs(batch=3, length=7, vocabulary_size=50, pad_last=2, seed=0):
    """Backbone inputs with the last `pad_last` positions of row 0 padded."""
    rng = np.random.default_rng(seed)
    padding_mask = np.ones((batch, length), "int32")
    if pad_last:
        padding_mask[0, -pad_last:] = 0
    token_ids = rng.integers(1, vocabulary_size, (batch, length)).astype("int32") * padding_mask
    segment_ids = np.zeros((batch, length), "int32")
    segment_ids[:, length // 2 :] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids * padding_mask, "padding_mask": padding_mask}


def _to_numpy(outputs):
    return keras.tree.map_structure(lambda t: keras.ops.convert_to_numpy(t).astype("float32"), outputs)


def assert_close(a, b, atol=0.0):
    for x, y in zip(keras.tree.flatten(_to_numpy(a)), keras.tree.flatten(_to_numpy(b))):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


def assert_weights_changed(before, model):
    after = [w.numpy() for w in model.trainable_weights]
    changed = sum(not np.array_equal(b, a) for b, a in zip(before, after))
    assert changed > 0, "one fit step changed no trainable weight"


def save_and_reload(model):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        return keras.saving.load_model(path)


def run_layer_test(layer_cls, init_kwargs, call_args, call_kwargs=None, expected_shape=None):
    """Build + call, config round trip, `.keras` round trip with identical outputs,
    one `fit` step that changes the weights, and a mixed_bfloat16 call."""
    call_kwargs = call_kwargs or {}
    layer = layer_cls(**init_kwargs)
    output = layer(*call_args, **call_kwargs)
    first = output[0] if isinstance(output, tuple) else output
    if expected_shape is not None:
        assert tuple(first.shape) == tuple(expected_shape)

    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config

    # Wrap in a functional model for .keras saving and fitting.
    inputs = [keras.Input(shape=np.shape(a)[1:], dtype=keras.backend.standardize_dtype(np.asarray(a).dtype), batch_size=None) for a in call_args]
    sym = layer_cls(**init_kwargs)(*inputs, **call_kwargs)
    sym = sym[0] if isinstance(sym, tuple) else sym
    model = keras.Model(inputs, sym)
    expected = model(list(call_args))
    reloaded = save_and_reload(model)
    assert_close(reloaded(list(call_args)), expected)

    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    before = [w.numpy() for w in model.trainable_weights]
    target = np.random.default_rng(1).normal(size=tuple(first.shape)).astype("float32")
    model.fit(list(call_args), target, epochs=1, batch_size=len(target), verbose=0)
    assert_weights_changed(before, model)

    mixed = layer_cls(**init_kwargs, dtype="mixed_bfloat16")
    mixed_out = mixed(*call_args, **call_kwargs)
    mixed_out = mixed_out[0] if isinstance(mixed_out, tuple) else mixed_out
    assert keras.backend.standardize_dtype(mixed_out.dtype) in ("bfloat16", "int32")
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(mixed_out, "float32"))))
    return layer


def run_model_test(make_model, x, y, sample_weight=None):
    """Config round trip, `.keras` round trip with identical predictions, one fit
    step that changes weights, and the same fit step under mixed_bfloat16."""
    model = make_model()
    config = model.get_config()
    clone = type(model).from_config(config)
    assert clone.get_config() == config

    expected = model.predict(x, verbose=0)
    reloaded = save_and_reload(model)
    assert_close(reloaded.predict(x, verbose=0), expected)

    before = [w.numpy() for w in model.trainable_weights]
    history = model.fit(x, y, sample_weight=sample_weight, epochs=1, batch_size=len(x["token_ids"]), verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert_weights_changed(before, model)

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = make_model()
        history = mixed.fit(x, y, sample_weight=sample_weight, epochs=1, batch_size=len(x["token_ids"]), verbose=0)
        assert np.isfinite(history.history["loss"][0])
    finally:
        keras.config.set_dtype_policy("float32")
    return model
