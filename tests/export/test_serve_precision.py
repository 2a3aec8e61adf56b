"""`kbert serve --precision` (issue 33): int8 and bf16 servers of a tiny classifier answer real MR
sentences with fp32's server's top labels, through the same TF Serving bodies (fp32 on the litert
runtime with its probabilities); int8, bf16 and litert need the Keras model, and auto says what it keeps. The
servers run as in test_serve.py (the real entry
point in a subprocess, over HTTP on 127.0.0.1)."""

import os

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from keras_bert_impl.cpu_features import CpuFeatures
from keras_bert_impl.tokenization import BertPreprocessor
from tests.commands.conftest import save_small_bert
from tests.export.conftest import REPO, mr_rows
from tests.export.test_serve import Server

pytestmark = pytest.mark.slow  # each server imports TensorFlow, exports the model and converts it


@pytest.fixture(scope="module")
def texts():
    return [text for _, text in mr_rows()[:16]]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, texts):
    """A one-layer classifier .keras fitted to the 16 MR sentences until it labels them
    confidently (logit margins about 3.3 to 3.6, both labels): a random head's near-ties would let
    any precision's rounding flip a label."""
    folder = tmp_path_factory.mktemp("serve_precision")
    init = save_small_bert(folder)
    keras.utils.set_random_seed(0)
    model = kb.BertClassifier(keras.saving.load_model(init), num_classes=2, label_names=["-1", "1"])
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    labels = np.array([0 if label == "-1" else 1 for label, _ in mr_rows()[:16]])
    model.fit(
        BertPreprocessor.from_model(model, sequence_length=64)(texts),
        labels,
        epochs=20,
        batch_size=16,
        verbose=0,
    )
    path = str(folder / "mr.keras")
    model.save(path)
    return path


@pytest.fixture(scope="module")
def fp32(classifier, texts):
    """`kbert serve` of the .keras at fp32: its answers to the texts, as text and as ids."""
    serving = Server("--model", classifier)
    try:
        return _answers(serving, texts)
    finally:
        assert serving.stop()[0] == 0


def _answers(serving, texts):
    status, answer = serving.request("POST", "/v1/models/mr:predict", {"instances": texts})
    assert status == 200, answer
    rows = answer["predictions"]
    ids = [
        {
            "ids": r["token_ids"],
            "mask": [int(i != 0) for i in r["token_ids"]],
            "segment_ids": [0] * len(r["token_ids"]),
        }
        for r in rows
    ]
    status, by_ids = serving.request("POST", "/v1/models/mr_ids:predict", {"instances": ids})
    assert status == 200, by_ids
    return rows, by_ids["predictions"]


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_int8_and_bf16_servers_answer_with_fp32s_top_labels(precision, classifier, texts, fp32):
    serving = Server("--model", classifier, "--precision", precision)
    try:
        rows, by_ids = _answers(serving, texts)
        status, metadata = serving.request("GET", "/v1/models/mr/metadata")
    finally:
        status_code, _, err = serving.stop()
    assert status_code == 0, err[-3000:]
    want, want_by_ids = fp32
    assert [r["top_label"] for r in rows] == [r["top_label"] for r in want]
    assert (
        len(set(r["top_label"] for r in want)) == 2
    )  # both labels among the sentences: not a constant answer
    # The precision ran: its probabilities are not fp32's, and the
    # ids model computes what the text model does.
    got, expected = np.array([r["probabilities"] for r in rows]), np.array([r["probabilities"] for r in want])
    assert not np.array_equal(got, expected)
    np.testing.assert_allclose(got, [r["probabilities"] for r in by_ids], atol=1e-6)
    assert [r["token_ids"] for r in rows] == [r["token_ids"] for r in want]
    signature = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert {"probabilities", "top_label", "top_score", "token_ids"} <= set(signature["outputs"])
    if precision == "int8":
        assert "converting the model to int8" in err
    # bf16 without BF16 says it is expected slower; int8 ran faster than fp32 on every CPU measured.
    slower = "is expected to be slower than fp32 here"
    if precision == "bf16":
        assert (f"{slower}: this CPU has no BF16" in err) == (
            not CpuFeatures.of_this_machine().has("BF16")
        ), err
    else:
        assert slower not in err, err[-3000:]


def test_the_litert_runtime_serves_fp32s_answers(classifier, texts, fp32):
    serving = Server("--model", classifier, "--runtime", "litert")
    try:
        rows, by_ids = _answers(serving, texts)
    finally:
        status_code, _, err = serving.stop()
    assert status_code == 0, err[-3000:]
    assert "converting the model to TFLite float32 on XNNPACK (--runtime litert)" in err
    want, _ = fp32
    assert [r["top_label"] for r in rows] == [r["top_label"] for r in want]
    # fp32 on XNNPACK: TensorFlow's probabilities up to summation order, for text and ids alike.
    got = np.array([r["probabilities"] for r in rows])
    np.testing.assert_allclose(got, [r["probabilities"] for r in want], atol=1e-4)
    np.testing.assert_allclose(got, [r["probabilities"] for r in by_ids], atol=1e-6)


def test_precision_needs_the_keras_model_and_auto_says_what_it_keeps(tmp_path, capsys):
    saved_model = os.path.join(REPO, "tests")  # not a model file: taken as SavedModels
    for precision in ("int8", "bf16"):
        assert main(["serve", "--model", saved_model, "--precision", precision, "--port", "0"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert (
            len(err) == 1
            and f"--precision {precision} needs the Keras model: pass the run folder or .keras file" in err[0]
        )
    assert main(["serve", "--model", saved_model, "--runtime", "litert", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "--runtime litert needs the Keras model: pass the run folder or .keras file" in err[0]
    )
    assert main(["serve", "--model", saved_model, "--precision", "auto", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert (
        "kbert serve: --precision auto: fp32, the SavedModels as they were exported" in err
        and "holds no SavedModel" in err
    )


def test_int8_refuses_a_token_head(tmp_path, capsys):
    path = str(tmp_path / "tagger.keras")
    keras.utils.set_random_seed(0)
    init = save_small_bert(tmp_path)
    kb.BertTokenClassifier(
        keras.saving.load_model(init), num_classes=3, label_names=["O", "B-X", "I-X"]
    ).save(path)
    assert main(["serve", "--model", path, "--precision", "int8", "--port", "0"]) == 2
    assert (
        "--precision int8 runs classification, pair and multilabel models; this model's task is tagging"
        in (capsys.readouterr().err)
    )
