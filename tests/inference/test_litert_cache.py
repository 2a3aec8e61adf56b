"""The LiteRT file cache (keras_bert_impl/inference/litert_cache.py): a second LiteRtForward of a
model reads the file the first converted, and it is byte for byte what a fresh conversion makes
(TensorFlow's converter, which the cache trusts to be deterministic); any change the conversion
reads misses; a damaged file is said and replaced; an unwritable folder or a model the key
cannot cover still converts; the folder keeps to its size; `kbert predict --precision int8`
reads the kept file in its next process."""

import json
import os
import warnings

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from keras_bert_impl.inference import LiteRtForward
from keras_bert_impl.inference.litert_cache import ENVIRONMENT_VARIABLE, LiteRtCache, keyable
from tests.harness import CLASSIFIER_IDS, CLASSIFIER_SEGMENTS, minilm_vocab_backbone, save_and_reload


def _backbone():
    """bert_tiny's widths (its kernels quantized by dynamic_int8 as bert_tiny's are) in one layer:
    the cache needs converted files, not depth, and the converter's time grows with each layer."""
    return kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=20, num_layers=1)


def _classifier(**kwargs):
    """The pooled 3-class classifier of tests/harness.py's tiny_classifiers, seeded, one layer deep."""
    keras.utils.set_random_seed(0)
    model = kb.BertClassifier(_backbone(), num_classes=3, **kwargs)
    model(
        {"token_ids": CLASSIFIER_IDS, "segment_ids": CLASSIFIER_SEGMENTS, "padding_mask": CLASSIFIER_IDS > 0}
    )
    return model


def _files(folder):
    return (
        sorted(name for name in os.listdir(folder) if name.endswith(".tflite"))
        if os.path.isdir(folder)
        else []
    )


def _kept(cache, model):
    """The names of the files `cache` keeps for `model` in float32."""
    return [name for name in _files(cache.folder) if name.startswith(cache.key(model, "float32"))]


def _run(forward):
    return forward(CLASSIFIER_IDS, CLASSIFIER_SEGMENTS, (CLASSIFIER_IDS > 0).astype("int32"))


def test_a_second_int8_forward_reads_the_converted_file(tmp_path):
    model = _classifier()
    cache = LiteRtCache(tmp_path / "cache")
    for quantization in ("dynamic_int8", "float32"):
        first = LiteRtForward(model, num_threads=1, quantization=quantization, cache=cache)
        again = LiteRtForward(model, num_threads=1, quantization=quantization, cache=cache)
        fresh = LiteRtForward(model, num_threads=1, quantization=quantization, cache=None)
        assert (first.cache_outcome, again.cache_outcome, fresh.cache_outcome) == ("miss", "hit", None)
        # What the cache rests on: the converter makes the same bytes every time.
        assert again.flatbuffer == first.flatbuffer == fresh.flatbuffer
        np.testing.assert_array_equal(_run(again)["logits"], _run(fresh)["logits"])
    assert len(_files(cache.folder)) == 2  # one file per quantization


def test_the_key_follows_everything_the_conversion_reads(tmp_path):
    model = _classifier()
    cache = LiteRtCache(tmp_path)
    key = cache.key(model, "dynamic_int8")
    # Another object of the same model (a .keras round trip) finds the same file ...
    assert cache.key(save_and_reload(model), "dynamic_int8") == key
    assert cache.key(model, "float32") != key
    # ... any weight changed by one ulp-sized step does not, nor another config.
    bias = model.output_dense.bias
    bias.assign(bias.numpy() + np.float32(1e-7))
    assert cache.key(model, "dynamic_int8") != key
    other = _classifier(pooling="mean")
    other.set_weights(model.get_weights())
    assert cache.key(other, "dynamic_int8") not in (key, cache.key(model, "dynamic_int8"))


class _OutsideLayer(keras.layers.Layer):
    """A layer class from outside keras and keras_bert_impl: its code is in no key."""

    def call(self, x):
        return x * 2.0


def test_a_model_with_a_layer_of_its_own_is_converted_every_time(tmp_path):
    inputs = keras.Input((3,))
    model = keras.Model(inputs, _OutsideLayer()(keras.layers.Dense(2)(inputs)))
    assert keyable(_classifier()) and not keyable(model)
    cache = LiteRtCache(tmp_path)
    calls = []
    for _ in range(2):
        assert cache.flatbuffer(model, "float32", lambda: calls.append(1) or b"converted") == b"converted"
        assert cache.last == "uncached"
    assert len(calls) == 2 and _files(tmp_path) == []


def test_a_damaged_file_is_said_and_converted_again(tmp_path):
    model = _classifier()
    cache = LiteRtCache(tmp_path)
    want = LiteRtForward(model, num_threads=1, cache=cache).flatbuffer
    (name,) = _files(tmp_path)
    path = tmp_path / name
    damaged = bytearray(want)
    damaged[len(damaged) // 2] ^= 0xFF
    path.write_bytes(bytes(damaged))
    with pytest.warns(
        UserWarning,
        match=rf"LiteRT cache: {path} does not match the digest in its name \(the file is "
        r"damaged\); removing it and converting the model again\.",
    ):
        forward = LiteRtForward(model, num_threads=1, cache=cache)
    assert forward.cache_outcome == "miss" and forward.flatbuffer == want
    assert path.read_bytes() == want  # replaced by the conversion's file


def test_a_damaged_file_in_a_read_only_cache_is_said_and_the_model_still_runs(tmp_path, monkeypatch):
    """Neither removed nor replaced there (it was an OSError ending the command, on every run)."""
    model = _classifier()
    cache = LiteRtCache(tmp_path)
    want = LiteRtForward(model, num_threads=1, cache=cache).flatbuffer
    (name,) = _files(tmp_path)
    (tmp_path / name).write_bytes(want[:-1] + bytes([want[-1] ^ 0xFF]))

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr("keras_bert_impl.inference.litert_cache.os.remove", read_only)
    monkeypatch.setattr("keras_bert_impl.atomic_write.os.replace", read_only)
    with pytest.warns(UserWarning) as said:
        forward = LiteRtForward(model, num_threads=1, cache=cache)
    messages = [str(w.message) for w in said]
    assert any("does not match the digest in its name" in m for m in messages), messages
    assert any(
        f"could not remove {tmp_path / name} ([Errno 30] Read-only file system)" in m for m in messages
    ), messages
    assert forward.cache_outcome == "miss" and forward.flatbuffer == want
    assert _run(forward)["logits"].shape == (2, 3)


def test_a_file_removed_by_another_process_is_converted_without_a_word(tmp_path, monkeypatch):
    """Another process's size cap may remove a file between the folder's listing and its read."""
    model = _classifier()
    cache = LiteRtCache(tmp_path)
    cache.flatbuffer(model, "float32", lambda: b"first")
    (name,) = _kept(cache, model)
    listed = [str(tmp_path / name)]
    os.remove(listed[0])
    monkeypatch.setattr("keras_bert_impl.inference.litert_cache.glob.glob", lambda pattern: list(listed))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.flatbuffer(model, "float32", lambda: b"again") == b"again"
    assert cache.last == "miss"


def test_an_unwritable_folder_still_converts_and_says_so(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    cache = LiteRtCache(blocker / "cache")
    with pytest.warns(
        UserWarning,
        match=rf"LiteRT cache: could not keep the converted model in {blocker / 'cache'} "
        rf"\(.*\); it runs, but the next process converts it again\. Set "
        rf"{ENVIRONMENT_VARIABLE} to a writable folder, or to off\.",
    ):
        forward = LiteRtForward(_classifier(), num_threads=1, cache=cache)
    assert _run(forward)["logits"].shape == (2, 3)


def test_the_folder_keeps_to_its_size_dropping_the_least_recently_used(tmp_path):
    models = [_classifier()]
    for seed in (1, 2):
        keras.utils.set_random_seed(seed)
        models.append(kb.BertClassifier(_backbone(), num_classes=3))
        models[-1](
            {
                "token_ids": CLASSIFIER_IDS,
                "segment_ids": CLASSIFIER_SEGMENTS,
                "padding_mask": CLASSIFIER_IDS > 0,
            }
        )
    cache = LiteRtCache(tmp_path, max_bytes=2 * 1000)
    for when, model in enumerate(models[:2]):
        cache.flatbuffer(model, "float32", lambda: b"x" * 1000)
        (name,) = _kept(cache, model)
        os.utime(tmp_path / name, (1000 + when, 1000 + when))  # the first written is the older
    # Reading the older one makes it the newer; the third file then pushes the other out.
    assert (
        cache.flatbuffer(models[0], "float32", lambda: b"not called") == b"x" * 1000 and cache.last == "hit"
    )
    cache.flatbuffer(models[2], "float32", lambda: b"y" * 1000)
    assert len(_files(tmp_path)) == 2 and _kept(cache, models[1]) == [], _files(tmp_path)
    # A file larger than the cap alone is still kept (the one just written is never removed).
    cache.flatbuffer(models[1], "float32", lambda: b"z" * 3000)
    assert _files(tmp_path) == _kept(cache, models[1]) and len(_files(tmp_path)) == 1


def test_the_folder_comes_from_the_environment(tmp_path):
    home = os.path.expanduser("~")
    assert LiteRtCache.from_environment({ENVIRONMENT_VARIABLE: "off"}) is None
    assert LiteRtCache.from_environment({ENVIRONMENT_VARIABLE: " OFF "}) is None
    assert LiteRtCache.from_environment({ENVIRONMENT_VARIABLE: str(tmp_path)}).folder == str(
        tmp_path / "litert"
    )
    assert LiteRtCache.from_environment({"XDG_CACHE_HOME": "/x"}).folder == "/x/keras_bert_impl/litert"
    assert LiteRtCache.from_environment({ENVIRONMENT_VARIABLE: ""}).folder == os.path.join(
        home, ".cache", "keras_bert_impl", "litert"
    )
    with pytest.raises(ValueError, match=r"max_bytes must be a positive integer\. Received: max_bytes=0"):
        LiteRtCache(tmp_path, max_bytes=0)
    with pytest.raises(
        ValueError, match=r"cache must be 'environment', a LiteRtCache or None\. Received: cache='off'"
    ):
        LiteRtForward(_classifier(), cache="off")


def test_kbert_predict_int8_reads_the_file_its_last_process_kept(tmp_path, monkeypatch, capsys):
    backbone = minilm_vocab_backbone(seed=None)
    path = str(tmp_path / "classifier.keras")
    kb.BertClassifier(backbone, num_classes=2, label_names=["neg", "pos"]).save(path)
    folder = tmp_path / "cache"
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(folder))
    outputs, kept = [], []
    for _ in range(2):  # each call loads the model anew, as a new process does
        assert (
            main(["predict", "--model", path, "--precision", "int8", "--json", "a gripping , funny film"])
            == 0
        )
        outputs.append(json.loads(capsys.readouterr().out))
        (name,) = _files(folder / "litert")
        kept.append(os.stat(folder / "litert" / name).st_ino)
    assert outputs[0] == outputs[1] and kept[0] == kept[1]  # the same file: read, not written again
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "off")
    os.remove(folder / "litert" / name)
    assert main(["predict", "--model", path, "--precision", "int8", "--json", "a gripping , funny film"]) == 0
    assert json.loads(capsys.readouterr().out) == outputs[0] and _files(folder / "litert") == []
