"""Shared test helpers: the checks every layer and model goes through."""

import gc
import os
import tempfile
from unittest import mock

import keras
import numpy as np
import tensorflow as tf


def tiny_backbone_config(**overrides):
    config = dict(
        vocabulary_size=50,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
    )
    config.update(overrides)
    return config


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINILM_VOCAB = os.path.join(REPO, "data", "minilm", "vocab.txt")


def minilm_vocab_backbone(num_layers=1, hidden_dim=16, intermediate_dim=32, seed=0, **config):
    """A small random `BertBackbone` with the real MiniLM vocabulary (30,522 tokens, lowercased)
    as its asset, so that tokenizing, exporting and serving run on real text; `seed=None` leaves
    Keras' random state as it is."""
    import keras_bert_impl as kb
    from keras_bert_impl.tokenization.vocabulary import read_vocabulary

    if seed is not None:
        keras.utils.set_random_seed(seed)
    config = dict(max_sequence_length=64, num_heads=2, **config)
    backbone = kb.BertBackbone(
        vocabulary_size=30522,
        num_layers=num_layers,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        **config,
    )
    backbone.set_vocabulary(read_vocabulary(MINILM_VOCAB), lowercase=True)
    return backbone


def randomize_like_trained(model, seed=1, heads=()):
    """Draws N(0, 0.5) into every LoRA kernel of `model` (Keras starts b at zero, so an untrained
    adapter changes nothing) and into each variable whose path contains one of `heads` (a pooler
    and head at their 0.02 initialization give logits of order 1e-3, too small for a close
    comparison to say much): the model then answers as one with trained adapters."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "lora_kernel" in variable.path or any(part in variable.path for part in heads):
            variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    return model


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


def id_calibration(length, examples=8, vocabulary_size=100, seed=0):
    """Calibration examples for a converter of the ids signature: `examples` single rows of
    random ids at [1, `length`], each padded from a random point on."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(examples):
        ids = rng.integers(4, vocabulary_size, (1, length)).astype(np.int32)
        ids[0, rng.integers(3, length) :] = 0
        rows.append({"ids": ids, "mask": (ids > 0).astype(np.int32), "segment_ids": np.zeros_like(ids)})
    return rows


def _to_numpy(outputs):
    return keras.tree.map_structure(lambda t: keras.ops.convert_to_numpy(t).astype("float32"), outputs)


def assert_close(a, b, atol=0.0):
    for x, y in zip(keras.tree.flatten(_to_numpy(a)), keras.tree.flatten(_to_numpy(b))):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


def assert_weights_changed(before, model):
    after = [w.numpy() for w in model.trainable_weights]
    changed = sum(not np.array_equal(b, a) for b, a in zip(before, after))
    assert changed > 0, "one fit step changed no trainable weight"


# Token ids, a pair's segments and padding for the tiny classifiers below: [2, 6] each.
CLASSIFIER_IDS = np.array([[2, 7, 9, 3, 0, 0], [2, 5, 3, 11, 12, 3]], "int32")
CLASSIFIER_SEGMENTS = np.array([[0] * 6, [0, 0, 0, 1, 1, 1]], "int32")


def tiny_classifiers():
    """(bert_tiny BertClassifier, its output name) for both poolings, a softmax head and a
    multi-label sigmoid head: the cases a classifier's other forward must give the Keras
    outputs of (the forms of integer_forms.py). Seeded, so each case is the same model."""
    import keras_bert_impl as kb

    for pooling, activation, multi_label in (
        ("pooled", None, False),
        ("mean", "softmax", False),
        ("pooled", "sigmoid", True),
    ):
        keras.utils.set_random_seed(0)
        model = kb.BertClassifier(
            kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=20),
            num_classes=3,
            pooling=pooling,
            activation=activation,
            multi_label=multi_label,
        )
        yield model, "logits" if activation is None else "probabilities"


def quantize(model, mode="int8"):
    """`model.quantize(mode)`, less Keras' `gc.collect()` after each variable it replaces
    (Layer.__delattr__, to free device buffers): 0.23 s each in a fresh process, 40 of them
    for MiniLM, and seconds each late in a long test session. One collect at the end."""
    with mock.patch.object(gc, "collect", lambda *args, **kwargs: 0):
        model.quantize(mode)
    gc.collect()
    return model


def save_and_reload(model):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        return keras.saving.load_model(path)


# Heads keep their output layers in float32 under a mixed policy (stable losses); every
# other sublayer must follow the policy.
FLOAT32_OUTPUT_LAYERS = ("logits", "span_logits", "mlm", "nsp")


def check_symbolic_call(call, eager_outputs, symbolic_inputs):
    """`call` on KerasTensors gives the eager outputs' structure, dtypes and shapes
    (None where the input had a None dimension)."""
    symbolic = call(*symbolic_inputs)
    eager = keras.tree.flatten(eager_outputs)
    spec = keras.tree.flatten(symbolic)
    assert len(spec) == len(eager), (symbolic, eager_outputs)
    for s, e in zip(spec, eager):
        assert keras.backend.standardize_dtype(s.dtype) == keras.backend.standardize_dtype(e.dtype), (
            s,
            e.dtype,
        )
        assert len(s.shape) == len(e.shape), (s.shape, e.shape)
        for want, got in zip(s.shape, e.shape):
            assert want is None or want == got, (s.shape, e.shape)


def check_mixed_precision(layer, policy="mixed_bfloat16", float32_layers=FLOAT32_OUTPUT_LAYERS):
    """Every sublayer of `layer` (built under `policy`) computes in the policy's dtype and keeps
    float32 variables, except the named output layers, which stay float32 throughout."""
    policy = keras.dtype_policies.get(policy)
    checked = 0
    for sublayer in layer._flatten_layers(include_self=True, recursive=True):
        if isinstance(sublayer, keras.layers.InputLayer):
            continue
        if sublayer.name in float32_layers:
            assert sublayer.compute_dtype == "float32", (sublayer.name, sublayer.dtype_policy)
        else:
            assert sublayer.compute_dtype == policy.compute_dtype, (sublayer.name, sublayer.dtype_policy)
            assert sublayer.variable_dtype == policy.variable_dtype, (sublayer.name, sublayer.dtype_policy)
        checked += 1
    for weight in layer.weights:
        assert weight.dtype == policy.variable_dtype, (weight.path, weight.dtype)
    assert checked > 1


def run_preprocessor_test(preprocessor, inputs):
    """The preprocessor gives the same ids called directly, mapped over a batched
    tf.data.Dataset, and mapped over single examples then batched (`inputs`: a list of
    strings, or a tuple of two lists for pairs)."""
    pair = isinstance(inputs, tuple)
    tensors = tuple(tf.constant(x) for x in inputs) if pair else tf.constant(inputs)
    direct = preprocessor(tensors)
    count = len(inputs[0]) if pair else len(inputs)

    def apply(*x):
        return preprocessor(tuple(x) if pair else x[0])

    dataset = tf.data.Dataset.from_tensor_slices(tensors)
    batched = next(iter(dataset.batch(count).map(apply)))
    unbatched = next(iter(dataset.map(apply).batch(count)))
    for key in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(batched[key].numpy(), direct[key].numpy())
        np.testing.assert_array_equal(unbatched[key].numpy(), direct[key].numpy())
    return direct


def run_layer_test(
    layer_cls, init_kwargs, call_args, call_kwargs=None, expected_shape=None, mixed_init_kwargs=None
):
    """Build + call, a symbolic call, config round trip, `.keras` round trip with identical
    outputs, one `fit` step that changes the weights, and a mixed_bfloat16 call with every
    sublayer's dtype checked. `mixed_init_kwargs` replace init arguments for that last
    instance where they are layers themselves (a tied embedding), which a model built under
    the policy would also have made under it."""
    call_kwargs = call_kwargs or {}
    layer = layer_cls(**init_kwargs)
    output = layer(*call_args, **call_kwargs)
    first = output[0] if isinstance(output, tuple) else output
    if expected_shape is not None:
        assert tuple(first.shape) == tuple(expected_shape)
    symbolic_args = [
        keras.KerasTensor(
            (None,) + tuple(np.shape(a)[1:]), dtype=keras.backend.standardize_dtype(np.asarray(a).dtype)
        )
        for a in call_args
    ]
    check_symbolic_call(lambda *a: layer(*a, **call_kwargs), output, symbolic_args)

    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config

    # Wrap in a functional model for .keras saving and fitting.
    inputs = [
        keras.Input(
            shape=np.shape(a)[1:], dtype=keras.backend.standardize_dtype(np.asarray(a).dtype), batch_size=None
        )
        for a in call_args
    ]
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

    mixed = layer_cls(**dict(init_kwargs, **(mixed_init_kwargs or {})), dtype="mixed_bfloat16")
    mixed_out = mixed(*call_args, **call_kwargs)
    mixed_out = mixed_out[0] if isinstance(mixed_out, tuple) else mixed_out
    assert keras.backend.standardize_dtype(mixed_out.dtype) in ("bfloat16", "int32")
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(mixed_out, "float32"))))
    check_mixed_precision(mixed)
    return layer


# Sequence inputs, cut shorter for the second shape the exported models are run at.
SEQUENCE_INPUTS = ("token_ids", "segment_ids", "padding_mask")


def _other_shape(x):
    """`x` at another batch size and sequence length: the first row, two tokens shorter
    (index inputs such as mask_positions clipped to the shorter length)."""
    length = x["token_ids"].shape[1] - 2
    return {
        k: v[:1, :length] if k in SEQUENCE_INPUTS else np.minimum(v[:1], length - 1) for k, v in x.items()
    }


def _by_name(outputs):
    return outputs if isinstance(outputs, dict) else {"output_0": outputs}


def run_export_test(model, x, atol=1e-4):
    """`model.export` to a SavedModel with [None, None] inputs and that SavedModel through the
    TFLite converter with builtin ops only (it raises on any op needing Flex or a custom
    kernel); both runtimes, at `x`'s shape and at another batch size and sequence length,
    give Keras' outputs. rtol 1e-6 covers the -1e9 of masked logits, whose float32 spacing is
    64; everything else is held to `atol`."""
    from ai_edge_litert.interpreter import Interpreter

    with tempfile.TemporaryDirectory() as tmp:
        model.export(tmp, format="tf_saved_model", verbose=False)
        serving = tf.saved_model.load(tmp).signatures["serving_default"]
        for name, spec in serving.structured_input_signature[1].items():
            assert spec.shape.as_list() == [None, None], (name, spec)
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.allow_custom_ops = False
        flatbuffer = converter.convert()
        for inputs in (x, _other_shape(x)):
            expected = _to_numpy(_by_name(model.predict(inputs, verbose=0)))
            saved = serving(**{k: tf.constant(v) for k, v in inputs.items()})
            runner = Interpreter(model_content=flatbuffer).get_signature_runner("serving_default")
            lite = runner(**{k: np.asarray(v) for k, v in inputs.items()})
            for runtime, got in (("SavedModel", saved), ("TFLite", lite)):
                assert sorted(got) == sorted(expected), (runtime, sorted(got), sorted(expected))
                for name, want in expected.items():
                    np.testing.assert_allclose(
                        np.asarray(got[name], "float32"),
                        want,
                        atol=atol,
                        rtol=1e-6,
                        err_msg=f"{runtime} {name}",
                    )
    interpreter = Interpreter(model_content=flatbuffer)
    interpreter.allocate_tensors()
    ops = {op["op_name"] for op in interpreter._get_ops_details()}
    assert not [op for op in ops if op.startswith("Flex") or op == "CUSTOM"], ops


def run_model_test(make_model, x, y, sample_weight=None):
    """A symbolic call, config round trip, `.keras` round trip with identical predictions,
    SavedModel and builtins-only TFLite exports at dynamic shapes (`run_export_test`), one
    fit step that changes weights, and the same fit step under mixed_bfloat16 with every
    sublayer's dtype checked."""
    model = make_model()
    symbolic_x = {k: keras.Input(shape=(None,), dtype="int32", name=k) for k in x}
    check_symbolic_call(lambda inputs: model(inputs), model(x), [symbolic_x])
    config = model.get_config()
    clone = type(model).from_config(config)
    assert clone.get_config() == config

    expected = model.predict(x, verbose=0)
    reloaded = save_and_reload(model)
    assert_close(reloaded.predict(x, verbose=0), expected)
    run_export_test(model, x)

    before = [w.numpy() for w in model.trainable_weights]
    history = model.fit(
        x, y, sample_weight=sample_weight, epochs=1, batch_size=len(x["token_ids"]), verbose=0
    )
    assert np.isfinite(history.history["loss"][0])
    assert_weights_changed(before, model)

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = make_model()
        check_mixed_precision(mixed)
        history = mixed.fit(
            x, y, sample_weight=sample_weight, epochs=1, batch_size=len(x["token_ids"]), verbose=0
        )
        assert np.isfinite(history.history["loss"][0])
    finally:
        keras.config.set_dtype_policy("float32")
    return model
