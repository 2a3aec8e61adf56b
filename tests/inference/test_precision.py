"""Inference precisions on a trained MiniLM classifier and real MR sentences: the bf16 copy
(`with_precision`) and the int8 forward (`LiteRtForward`, TFLite dynamic-range int8 on
XNNPACK) give fp32's labels and its accuracy; the bf16 copy leaves the original and Keras'
global policy alone; `kbert predict` / `evaluate --precision` use them."""

import csv
import json
import os

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from keras_bert_impl.inference import LiteRtForward, TextPredictor, with_precision
from keras_bert_impl.inference.precision import computes_in
from keras_bert_impl.inference.litert_forms import LiteRtForms
from keras_bert_impl.models.integer_forms import classifier_forward
from keras_bert_impl.tokenization import BertPreprocessor
from tests.harness import (
    CLASSIFIER_IDS,
    CLASSIFIER_SEGMENTS,
    minilm_vocab_backbone,
    quantize,
    tiny_classifiers,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MR = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee2.csv")


@pytest.fixture(scope="module")
def rows():
    with open(MR, encoding="utf-8-sig", newline="") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def classifier_file(tmp_path_factory):
    """A one-layer random classifier with the real MiniLM vocabulary, saved once for the tests of
    the commands' flags: they check what each flag runs and refuses, which MiniLM's size does not
    change (its int8 and float conversions cost these tests most of their time)."""
    path = str(tmp_path_factory.mktemp("classifier") / "classifier.keras")
    kb.BertClassifier(minilm_vocab_backbone(), num_classes=2, label_names=["-1", "1"]).save(path)
    return path


@pytest.fixture(scope="module")
def trained(minilm_keras, rows):
    """A MiniLM classifier after a quick fit on real MR rows (a real classifier, not
    near-ties), 200 held-out sentences of both classes, their labels, and fp32's logits."""
    # A private copy of MiniLM: this trains it, and the session's `minilm` must stay as converted.
    backbone = keras.saving.load_model(minilm_keras)
    # Seeded: the head's initialisation and the batches. The fit itself still differs a little
    # from run to run (held-out accuracy 0.57-0.61 in two identical runs of the old settings).
    keras.utils.set_random_seed(0)
    model = kb.BertClassifier(backbone, num_classes=2, pooling="mean", label_names=["-1", "1"])
    # Two epochs at 1e-4: after one at 5e-5 (8 steps) the logits stayed within 0.25 of each
    # other, about 70% of the held-out rows were near-ties (margin < 0.1), and which rows
    # flipped between precisions changed from run to run (TensorFlow's CPU training is not
    # bit-reproducible); here about 93% have a margin above 0.1 (measured in 2 runs).
    model.compile(optimizer=keras.optimizers.Adam(1e-4))
    train = rows[200:328] + rows[-328:-200]
    x = BertPreprocessor.from_model(model, sequence_length=64)([text for _, text in train])
    model.fit(
        x, np.array([0 if label == "-1" else 1 for label, _ in train]), epochs=2, batch_size=32, verbose=0
    )
    held_out = rows[:100] + rows[-100:]
    texts = [text for _, text in held_out]
    labels = np.array([0 if label == "-1" else 1 for label, _ in held_out])
    fp32 = TextPredictor(model, sequence_length=64).predict(texts)["logits"]
    return model, texts, labels, fp32


@pytest.mark.slow  # about 20 s or more: bf16 inference of MiniLM over MR sentences
def test_bf16_copy_gives_the_fp32_labels(trained):
    model, texts, labels, want = trained
    fast = with_precision(model, "bf16")
    assert fast.dtype_policy.name == "mixed_bfloat16" and model.dtype_policy.name == "float32"
    assert keras.config.dtype_policy().name == "float32"
    assert fast.label_names == ["-1", "1"] and fast.backbone.vocabulary == model.backbone.vocabulary
    got = TextPredictor(fast, sequence_length=64).predict(texts)["logits"]
    assert got.dtype == np.float32
    # bf16 keeps 8 bits of mantissa: logits move by hundredths, labels stay.
    assert np.abs(got - want).max() < 0.1, np.abs(got - want).max()
    assert np.mean(got.argmax(-1) == want.argmax(-1)) >= 0.98
    assert abs(np.mean(got.argmax(-1) == labels) - np.mean(want.argmax(-1) == labels)) <= 0.02
    assert with_precision(model, "fp32") is model
    # And back: a model computing in bf16 (the file of a --precision bf16 run, say) runs fp32 as fp32.
    back = with_precision(fast, "fp32")
    assert computes_in(back) == {"float32"} and back.label_names == ["-1", "1"]
    np.testing.assert_array_equal(TextPredictor(back, sequence_length=64).predict(texts)["logits"], want)
    # The litert runtime converts float32 graphs: given the bf16 copy, it converts the float32 one
    # (the bf16 graph's conversion failed). Within 1e-4 of Keras' fp32, as test_litert_* measure.
    litert = TextPredictor(fast, sequence_length=64, runtime="litert").predict(texts)["logits"]
    np.testing.assert_allclose(litert, want, atol=1e-4)
    # TextPredictor's own bf16 is the same copy.
    np.testing.assert_allclose(
        TextPredictor(model, sequence_length=64, precision="bf16").predict(texts)["logits"], got, atol=1e-6
    )


# Slow with its fixture: `trained` fine-tunes MiniLM (a minute and more here), which only these
# tests use; make test-slow builds it for the bf16 and Keras-int8 tests anyway.
@pytest.mark.slow  # about 20 s or more: int8 inference of the fine-tuned MiniLM (and its fine-tune)
def test_int8_forward_gives_the_fp32_labels(trained):
    model, texts, labels, want = trained
    predictor = TextPredictor(model, sequence_length=64, precision="int8")
    forward = predictor._forward
    assert isinstance(forward, LiteRtForward) and forward.output_names == ("logits",)
    # int8 weights: a quarter of the float32 bytes, plus the float LayerNorm/bias vectors.
    float_bytes = sum(w.size * 4 for w in model.get_weights())
    assert forward.size_bytes < 0.3 * float_bytes, (forward.size_bytes, float_bytes)
    got = predictor.predict(texts)["logits"]
    assert got.dtype == np.float32 and got.shape == want.shape
    # Weights rounded to 256 levels per channel, activations per batch: logits move by
    # hundredths (0.04-0.05 in the fixture's trainings here). Near-ties (fp32 margin < 0.1)
    # may flip; above that margin none may.
    assert np.abs(got - want).max() < 0.1, np.abs(got - want).max()
    sure = np.abs(want[:, 1] - want[:, 0]) > 0.1
    assert sure.mean() > 0.6, sure.mean()
    flipped = np.flatnonzero(sure & (got.argmax(-1) != want.argmax(-1)))
    assert not len(flipped), (want[flipped], got[flipped])
    assert np.mean(got.argmax(-1) == want.argmax(-1)) >= 0.95
    assert abs(np.mean(got.argmax(-1) == labels) - np.mean(want.argmax(-1) == labels)) <= 0.02
    # Batch shapes change from call to call (length buckets): the same row gives the same
    # logits whatever batch it is in, up to the per-batch activation scale.
    ids = BertPreprocessor.from_model(model, sequence_length=64)(texts[:8])
    # Row 0 alone at its own width (no padding at all), against its logits in a batch of 32.
    width = int(np.asarray(ids["padding_mask"])[0].sum())
    alone = forward(*(np.asarray(ids[k])[:1, :width] for k in ("token_ids", "segment_ids", "padding_mask")))[
        "logits"
    ]
    assert np.abs(alone[0] - got[0]).max() < 0.1, (alone[0], got[0])


@pytest.mark.slow  # about 20 s or more: litert inference of the fine-tuned MiniLM (and its fine-tune)
def test_litert_float32_forward_gives_the_fp32_logits(trained):
    # fp32 on the litert runtime: XNNPACK's float kernels, the same logits as TensorFlow's up to
    # summation order, for every length-sorted batch TextPredictor makes.
    model, texts, _, want = trained
    ids = BertPreprocessor.from_model(model, sequence_length=64)(texts[:32])
    forward = LiteRtForward(model, num_threads=1, quantization="float32")
    got = forward(*(np.asarray(ids[k]) for k in ("token_ids", "segment_ids", "padding_mask")))["logits"]
    np.testing.assert_allclose(got, want[:32], atol=1e-4)
    predictor = TextPredictor(model, sequence_length=64, runtime="litert")
    assert predictor.runtime == "litert" and isinstance(predictor._forward, LiteRtForward)
    assert predictor._forward.size_bytes > 0.9 * sum(
        w.size * 4 for w in model.get_weights()
    )  # float32 weights
    np.testing.assert_allclose(predictor.predict(texts)["logits"], want, atol=1e-4)
    assert TextPredictor(model, sequence_length=64).runtime == "tensorflow"
    assert TextPredictor(model, sequence_length=64, precision="int8").runtime == "litert"
    with pytest.raises(
        ValueError,
        match=r"quantization must be one of \('dynamic_int8', 'float32'\). "
        r"Received: quantization='int8'",
    ):
        LiteRtForward(model, quantization="int8")


def test_litert_forms_convert_every_classifier_to_its_keras_function():
    """LiteRtForward converts a BertClassifier in LiteRtForms (not its Keras graph): in float32 on
    XNNPACK the file gives the Keras model's outputs (both poolings, softmax and multi-label
    sigmoid heads, a pair's segments, padding), under the model's own output name."""
    ids, segments = CLASSIFIER_IDS, CLASSIFIER_SEGMENTS
    x = {"token_ids": ids, "padding_mask": ids > 0, "segment_ids": segments}
    for model, key in tiny_classifiers():
        pooling = model.pooling
        want = np.asarray(model(x)[key])
        assert np.abs(np.asarray(classifier_forward(model, x, LiteRtForms())[key]) - want).max() < 1e-5
        forward = LiteRtForward(model, num_threads=1, quantization="float32")
        assert forward.output_names == (key,)
        # The file holds the forms: Q, K, V, the attention output and the two feed-forward
        # layers per block (no UNPACK of a merged Q/K/V), the pooler if pooled, the head.
        ops_in_file = _builtin_ops(forward.flatbuffer)
        fully_connected = 6 * len(model.backbone.transformer_layers) + (2 if pooling == "pooled" else 1)
        assert "UNPACK" not in ops_in_file and ops_in_file.count("FULLY_CONNECTED") == fully_connected
        got = forward(ids, segments, (ids > 0).astype("int32"))[key]
        assert np.abs(got - want).max() < 1e-5, (pooling, key, np.abs(got - want).max())


def _builtin_ops(flatbuffer):
    from ai_edge_litert.interpreter import Interpreter

    # Every op in order (conversion.tflite_ops gives their set; here the count matters).
    return [op["op_name"] for op in Interpreter(model_content=flatbuffer)._get_ops_details()]


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_a_model_saved_under_a_mixed_policy_loads_computing_in_float32(policy, tmp_path):
    """What a --precision fp16/bf16 run saved before its model files were float32: the commands
    load it computing in float32 (fp16's TFLite conversion failed on its float16 ops)."""
    from keras_bert_impl.commands.model_files import load_model

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        backbone = kb.BertBackbone(
            vocabulary_size=60,
            num_layers=1,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=16,
        )
        mixed = kb.BertClassifier(backbone, num_classes=2, label_names=["a", "b"])
        pretrainer = kb.BertPretrainer(backbone)
    finally:
        keras.config.set_dtype_policy(previous)
    mixed.save(tmp_path / "mixed.keras")
    loaded, _ = load_model(str(tmp_path / "mixed.keras"))
    assert policy.split("_")[1] in computes_in(mixed) and computes_in(loaded) == {"float32"}
    assert loaded.label_names == ["a", "b"] and keras.config.dtype_policy().name == "float32"
    # The same architecture built in float32, given the mixed model's weights, computes the same.
    reference = kb.BertClassifier(
        kb.BertBackbone(
            vocabulary_size=60,
            num_layers=1,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=16,
        ),
        num_classes=2,
    )
    reference.set_weights(mixed.get_weights())
    x = {
        "token_ids": CLASSIFIER_IDS,
        "segment_ids": CLASSIFIER_SEGMENTS,
        "padding_mask": np.ones_like(CLASSIFIER_IDS),
    }
    np.testing.assert_array_equal(loaded(x)["logits"].numpy(), reference(x)["logits"].numpy())
    assert (
        np.abs(mixed(x)["logits"].numpy() - reference(x)["logits"].numpy()).max() > 0
    )  # it computed otherwise
    assert computes_in(with_precision(pretrainer, "fp32")) == {
        "float32"
    }  # a head that takes mask positions too


def test_bad_precision_is_named(minilm):
    with pytest.raises(
        ValueError, match=r"precision must be one of \['fp32', 'bf16'\]. Received: precision='int8'"
    ):
        with_precision(minilm, "int8")
    model = kb.BertClassifier(minilm, num_classes=2)
    with pytest.raises(
        ValueError, match=r"precision must be one of \['fp32', 'bf16', 'int8'\]. Received: precision='fp16'"
    ):
        TextPredictor(model, precision="fp16")
    # The old spellings of a precision are refused with the name used here (keras_bert_impl/precisions.py).
    with pytest.raises(ValueError, match=r"precision 'mixed_bfloat16' is spelled 'bf16' here"):
        with_precision(minilm, "mixed_bfloat16")
    with pytest.raises(ValueError, match=r"precision 'float32' is spelled 'fp32' here"):
        TextPredictor(model, precision="float32")
    # Runtimes a precision has no path on, refused before any conversion.
    with pytest.raises(
        ValueError,
        match=r"runtime litert runs precision fp32 or int8; bf16 runs on tensorflow only\. "
        r"Received: runtime='litert' with precision='bf16'",
    ):
        TextPredictor(model, precision="bf16", runtime="litert")
    with pytest.raises(
        ValueError, match=r"runtime must be one of \['tensorflow', 'litert'\]. Received: runtime='xnnpack'"
    ):
        TextPredictor(model, runtime="xnnpack")


@pytest.mark.slow  # about 20 s or more: kbert predict and evaluate at each precision
def test_kbert_predict_and_evaluate_take_precision(classifier_file, rows, tmp_path, capsys):
    path = classifier_file
    outputs = {}
    for precision in ("fp32", "bf16", "int8"):
        assert (
            main(["predict", "--model", path, "--precision", precision, "--json", "a gripping , funny film"])
            == 0
        )
        outputs[precision] = json.loads(capsys.readouterr().out)
    for precision in ("bf16", "int8"):
        assert abs(outputs["fp32"]["probability"] - outputs[precision]["probability"]) < 0.03, outputs
    data = tmp_path / "dev.csv"
    with open(data, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([("label", "text")] + rows[:20] + rows[-20:])
    metrics = {}
    for precision in ("fp32", "int8"):
        assert (
            main(["evaluate", "--model", path, "--data", str(data), "--precision", precision, "--json"]) == 0
        )
        metrics[precision] = json.loads(capsys.readouterr().out)
    assert metrics["int8"]["examples"] == metrics["fp32"]["examples"] == 40, metrics


def test_kbert_predict_takes_the_litert_runtime_for_fp32(classifier_file, capsys):
    path = classifier_file
    outputs = {}
    for runtime in ("tensorflow", "litert"):
        assert (
            main(["predict", "--model", path, "--runtime", runtime, "--json", "a gripping , funny film"]) == 0
        )
        outputs[runtime] = json.loads(capsys.readouterr().out)
    assert abs(outputs["tensorflow"]["probability"] - outputs["litert"]["probability"]) < 1e-4, outputs
    assert outputs["tensorflow"]["label"] == outputs["litert"]["label"]
    # A runtime the precision has no path on, and a runtime with auto: usage errors naming the fix.
    assert main(["predict", "--model", path, "--precision", "bf16", "--runtime", "litert", "a film"]) == 2
    err = capsys.readouterr().err
    assert (
        "--runtime litert runs --precision fp32 or int8; bf16 runs on tensorflow only. Received: "
        "--runtime='litert' with --precision='bf16': leave --runtime out, or pick --precision fp32 or int8."
    ) in err, err
    assert main(["predict", "--model", path, "--precision", "auto", "--runtime", "litert", "a film"]) == 2
    assert "--runtime litert goes with an explicit --precision" in capsys.readouterr().err


def test_int8_refuses_token_heads(tmp_path, capsys):
    path = str(tmp_path / "tagger.keras")
    kb.BertTokenClassifier(minilm_vocab_backbone(), num_classes=3, label_names=["O", "B-X", "I-X"]).save(path)
    assert main(["predict", "--model", path, "--precision", "int8", "the cat sat"]) == 2
    err = capsys.readouterr().err
    assert (
        "--precision int8 runs classification, pair and multilabel models; this model's task is tagging"
        in err
    ), err
    assert main(["predict", "--model", path, "--runtime", "litert", "the cat sat"]) == 2
    err = capsys.readouterr().err
    assert (
        "--runtime litert runs classification, pair and multilabel models; this model's task is tagging"
        in err
    ), err


@pytest.mark.slow  # about 20 s or more: quantizes, saves and reloads MiniLM
def test_keras_int8_quantized_classifier_saves_loads_and_predicts(trained, tmp_path, capsys):
    """Keras' own model.quantize("int8") on the trained classifier: the .keras file loads back
    quantized and `kbert predict` on it gives fp32's labels; bf16 on top of it is refused."""
    model, texts, labels, want = trained
    quantized = kb.BertClassifier.from_config(model.get_config())
    quantized.set_weights(model.get_weights())
    quantized.backbone.set_vocabulary(model.backbone.vocabulary, model.backbone.lowercase)
    quantize(quantized, "int8")
    path = str(tmp_path / "int8.keras")
    quantized.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.backbone.embeddings.token_embedding.embeddings.dtype == "int8"
    assert loaded.get_layer("logits").quantization_mode == "int8"
    got = TextPredictor(loaded, sequence_length=64).predict(texts)["logits"]
    # The bar of the int8 forward above: logits move by hundredths; near-ties (fp32 margin
    # < 0.1) may flip, nothing above that margin may.
    print(
        f"Keras int8 vs fp32: max |logit diff| {np.abs(got - want).max():.4f}, label agreement "
        f"{np.mean(got.argmax(-1) == want.argmax(-1)):.3f}"
    )
    assert np.abs(got - want).max() < 0.1, np.abs(got - want).max()
    sure = np.abs(want[:, 1] - want[:, 0]) > 0.1
    assert not np.any(sure & (got.argmax(-1) != want.argmax(-1)))
    assert np.mean(got.argmax(-1) == want.argmax(-1)) >= 0.95
    assert abs(np.mean(got.argmax(-1) == labels) - np.mean(want.argmax(-1) == labels)) <= 0.02
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("".join(text.strip() + "\n" for text in texts[:10]), encoding="utf-8")
    capsys.readouterr()
    assert main(["predict", "--model", path, "--file", str(sentences), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["label"] for row in rows] == [["-1", "1"][i] for i in got[:10].argmax(-1)]
    with pytest.raises(
        ValueError, match=r"with_precision\('bf16'\) needs a float model; this one was quantized \(int8\)"
    ):
        with_precision(loaded, "bf16")
    for precision in ("bf16", "int8"):
        assert main(["predict", "--model", path, "--precision", precision, "a gripping , funny film"]) == 2
        assert (
            f"--precision {precision} needs a float model; this one was quantized (int8)"
            in capsys.readouterr().err
        )
    assert main(["predict", "--model", path, "--runtime", "litert", "a gripping , funny film"]) == 2
    assert (
        "--runtime litert needs a float model; this one was quantized (int8) with Keras' model.quantize"
        in (capsys.readouterr().err)
    )
