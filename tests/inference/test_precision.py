"""with_precision: a bf16 copy of a trained model gives fp32's labels on real MR sentences,
leaves the original and Keras' global policy alone; `kbert predict --precision bf16` uses it."""

import csv
import os

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from keras_bert_impl.inference import TextPredictor, with_precision
from keras_bert_impl.tokenization import BertPreprocessor

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MR = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee2.csv")


@pytest.fixture(scope="module")
def rows():
    with open(MR, encoding="utf-8-sig", newline="") as f:
        return list(csv.reader(f))


def test_bf16_copy_gives_the_fp32_labels(minilm_keras, rows):
    texts = [text for _, text in rows[:100] + rows[-100:]]  # both classes
    labels = np.array([0 if label == "-1" else 1 for label, _ in rows[:100] + rows[-100:]])
    # A private copy of MiniLM: this test trains it, and the session's `minilm` must stay as converted.
    backbone = keras.saving.load_model(minilm_keras)
    model = kb.BertClassifier(backbone, num_classes=2, pooling="mean", label_names=["-1", "1"])
    # A quick fit on other real rows, so the head is a real classifier, not near-ties.
    train = rows[200:328] + rows[-328:-200]
    x = BertPreprocessor.from_model(model, sequence_length=64)([text for _, text in train])
    model.fit(x, np.array([0 if label == "-1" else 1 for label, _ in train]), epochs=1, batch_size=32, verbose=0)
    fast = with_precision(model, "bf16")
    assert fast.dtype_policy.name == "mixed_bfloat16" and model.dtype_policy.name == "float32"
    assert keras.config.dtype_policy().name == "float32"
    assert fast.label_names == ["-1", "1"] and fast.backbone.vocabulary == backbone.vocabulary
    want = TextPredictor(model, sequence_length=64).predict(texts)["logits"]
    got = TextPredictor(fast, sequence_length=64).predict(texts)["logits"]
    assert got.dtype == np.float32
    # bf16 keeps 8 bits of mantissa: logits move by hundredths, labels stay.
    assert np.abs(got - want).max() < 0.1, np.abs(got - want).max()
    assert np.mean(got.argmax(-1) == want.argmax(-1)) >= 0.98
    assert abs(np.mean(got.argmax(-1) == labels) - np.mean(want.argmax(-1) == labels)) <= 0.02
    assert with_precision(model, "fp32") is model


def test_bad_precision_is_named(minilm):
    with pytest.raises(ValueError, match=r"precision must be one of \['fp32', 'bf16'\]. Received: precision='int8'"):
        with_precision(minilm, "int8")


def test_kbert_predict_takes_precision(minilm, tmp_path, capsys):
    model = kb.BertClassifier(minilm, num_classes=2, label_names=["neg", "pos"])
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    outputs = {}
    for precision in ("fp32", "bf16"):
        assert main(["predict", "--model", path, "--precision", precision, "--json", "a gripping , funny film"]) == 0
        outputs[precision] = capsys.readouterr().out
    import json

    fp32, bf16 = (json.loads(outputs[p]) for p in ("fp32", "bf16"))
    assert abs(fp32["probability"] - bf16["probability"]) < 0.02
