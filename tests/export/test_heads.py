"""Every head kbert finetune makes, and the embedder, through the export: the raw-text
SavedModel's readable outputs and the float32 .tflite against the Keras model, on tiny
models with the real MiniLM vocabulary and real MR sentences."""

import os

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

import keras_bert_impl as kb
from keras_bert_impl_export.exporter import export_model, tokenize
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS
from keras_bert_impl_export.export_signatures import ExportSignatures
from tests.export.conftest import mr_rows
from tests.harness import minilm_vocab_backbone

SEQ_LEN = 24
TEXTS = [text for _, text in mr_rows()[:12]]


def _backbone():
    return minilm_vocab_backbone(num_layers=2)


def _export(model, tmp_path, pair=False):
    out = str(tmp_path / "out")
    export_model(
        model,
        out,
        sequence_length=SEQ_LEN,
        pair=pair,
        formats=("saved_model", "tflite"),
        quantizations=("float32",),
        log=lambda line: None,
    )
    text_fn = tf.saved_model.load(os.path.join(out, "serving", "bert", "1")).signatures["serving_default"]
    runner = Interpreter(model_path=os.path.join(out, "tflite", "bert_float32.tflite")).get_signature_runner(
        "serving_default"
    )
    return out, text_fn, runner


def _keras(model, x):
    return model.predict(
        {"token_ids": x["ids"], "segment_ids": x["segment_ids"], "padding_mask": x["mask"]}, verbose=0
    )


@pytest.mark.slow  # about 20 s or more: exports a tagger and converts it to TFLite
def test_tagger_gives_a_tag_and_a_piece_per_token(tmp_path):
    model = kb.BertTokenClassifier(_backbone(), num_classes=3, label_names=["O", "B-X", "I-X"])
    _, text_fn, runner = _export(model, tmp_path)
    out = text_fn(text=tf.constant(TEXTS[:3]))
    x = tokenize(ExportSignatures(model, SEQ_LEN), TEXTS[:3])
    want = _keras(model, x)["logits"]
    np.testing.assert_allclose(out["logits"].numpy(), want, atol=1e-4, rtol=0)
    np.testing.assert_allclose(
        runner(**{k: x[k] for k in EXPORT_ID_INPUTS})["logits"], want, atol=1e-4, rtol=0
    )
    tags, tokens, ids = out["tags"].numpy(), out["tokens"].numpy(), x["ids"]
    names = np.array([b"O", b"B-X", b"I-X"])
    for row in range(3):
        real = (x["mask"][row] == 1) & (ids[row] != 101) & (ids[row] != 102)
        assert list(tags[row][real]) == list(names[want[row].argmax(-1)][real])
        assert set(tags[row][~real]) == {b""}
    assert tokens[0, 0] == b"[CLS]" and tokens[0, -1] in (b"[SEP]", b"")


@pytest.mark.slow  # about 20 s or more: exports and converts a span labeler to TFLite
def test_span_labeler_answers_inside_the_context(tmp_path):
    model = kb.BertSpanLabeler(_backbone())
    _, text_fn, _ = _export(model, tmp_path)
    questions = ["what is it about?", "who is kinnear?", "q"]
    contexts = TEXTS[:2] + [""]
    out = text_fn(question=tf.constant(questions), context=tf.constant(contexts))
    serving = ExportSignatures(model, SEQ_LEN)
    x = tokenize(serving, list(zip(questions, contexts)))
    want = _keras(model, x)
    start_logits, end_logits = want["start_logits"], want["end_logits"]
    for row in range(2):
        context = (x["segment_ids"][row] == 1) & (x["mask"][row] == 1) & (x["ids"][row] != 102)
        positions = np.flatnonzero(context)
        best = max(
            (
                (start_logits[row, i] + end_logits[row, j], i, j)
                for i in positions
                for j in positions
                if i <= j < i + 30
            )
        )
        assert (out["start"].numpy()[row], out["end"].numpy()[row]) == (best[1], best[2])
        answer = serving.preprocessor.detokenize(x["ids"][row : row + 1, best[1] : best[2] + 1]).numpy()[0]
        assert out["answer"].numpy()[row] == answer
    # An empty context holds no span.
    assert (out["start"].numpy()[2], out["end"].numpy()[2], out["answer"].numpy()[2]) == (-1, -1, b"")


@pytest.mark.parametrize("multi_label", [False, True])
@pytest.mark.slow  # about 20 s or more: exports and converts two heads to TFLite
def test_pair_and_multi_label_classifiers(tmp_path, multi_label):
    model = kb.BertClassifier(
        _backbone(), num_classes=3, multi_label=multi_label, label_names=["a", "b", "c"]
    )
    _, text_fn, runner = _export(model, tmp_path, pair=not multi_label)
    if multi_label:
        out = text_fn(text=tf.constant(TEXTS[:4]))
        x = tokenize(ExportSignatures(model, SEQ_LEN), TEXTS[:4])
    else:
        out = text_fn(text=tf.constant(TEXTS[:4]), text_b=tf.constant(TEXTS[4:8]))
        x = tokenize(ExportSignatures(model, SEQ_LEN, pair=True), list(zip(TEXTS[:4], TEXTS[4:8])))
        assert (x["segment_ids"] == 1).any()
    want = _keras(model, x)["logits"]
    np.testing.assert_allclose(out["logits"].numpy(), want, atol=1e-4, rtol=0)
    np.testing.assert_allclose(
        runner(**{k: x[k] for k in EXPORT_ID_INPUTS})["logits"], want, atol=1e-4, rtol=0
    )
    activation = (
        (lambda z: 1 / (1 + np.exp(-z)))
        if multi_label
        else (lambda z: np.exp(z) / np.exp(z).sum(-1, keepdims=True))
    )
    np.testing.assert_allclose(out["probabilities"].numpy(), activation(want), atol=1e-5)


@pytest.mark.slow  # about 20 s or more: exports an embedder and converts it to TFLite
def test_embedder_exports_unit_embeddings(tmp_path):
    model = kb.BertEmbedder(_backbone(), pooling="mean")
    out, text_fn, runner = _export(model, tmp_path)
    x = tokenize(ExportSignatures(model, SEQ_LEN), TEXTS)
    want = _keras(model, x)["embeddings"]
    np.testing.assert_allclose(
        text_fn(text=tf.constant(TEXTS))["embeddings"].numpy(), want, atol=1e-5, rtol=0
    )
    np.testing.assert_allclose(
        runner(**{k: x[k] for k in EXPORT_ID_INPUTS})["embeddings"], want, atol=1e-5, rtol=0
    )
    assert not os.path.exists(os.path.join(out, "labels.txt"))


def test_id_saved_model_names_a_bad_input_its_value_and_where_it_is(tmp_path):
    """Unchecked, the graph read a negative id as one counted from the table's end (a plausible
    answer) and failed on an id past it in a GatherV2 node, the value wrapped (-40000 read as
    -9478). The check is in the graph, so TF Serving answers the same 400; the float TFLite file
    converted from this SavedModel holds only builtins (the converter drops Assert ops)."""
    model = kb.BertClassifier(_backbone(), num_classes=2)
    out, _, runner = _export(model, tmp_path)
    ids_fn = tf.saved_model.load(os.path.join(out, "serving", "bert_ids", "1")).signatures["serving_default"]
    good = {
        "ids": np.full((2, SEQ_LEN), 1996, np.int32),
        "mask": np.ones((2, SEQ_LEN), np.int32),
        "segment_ids": np.zeros((2, SEQ_LEN), np.int32),
    }
    np.testing.assert_allclose(ids_fn(**good)["logits"].numpy(), runner(**good)["logits"], atol=1e-4, rtol=0)
    for name, value, expected in (
        ("ids", -1, "[0, 30522)"),
        ("ids", -40000, "[0, 30522)"),
        ("ids", 30522, "[0, 30522)"),
        ("segment_ids", 2, "[0, 2)"),
        ("mask", 3, "[0, 2)"),
        ("mask", -1, "[0, 2)"),
    ):
        bad = {k: v.copy() for k, v in good.items()}
        bad[name][1, 7] = value
        with pytest.raises(tf.errors.InvalidArgumentError) as error:
            ids_fn(**bad)
        assert (
            f"Input {name} holds {value} at example 1, position 7: this model takes values in {expected} "
            "there" in str(error.value)
        ), str(error.value)
    # These failed in a Slice, a strided_slice and an add of the model, naming no input.
    for width in (0, 65):
        ones = np.ones((2, width), np.int32)
        with pytest.raises(tf.errors.InvalidArgumentError) as error:
            ids_fn(ids=ones, mask=ones, segment_ids=ones * 0)
        assert (
            f"Input ids has {width} positions per example: this model takes 1 to 64 (its max_sequence_length)"
            in str(error.value)
        ), str(error.value)
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        ids_fn(ids=good["ids"], mask=good["mask"][:, :-1], segment_ids=good["segment_ids"])
    assert (
        f"Input mask has shape [2 {SEQ_LEN - 1}], and ids [2 {SEQ_LEN}]: send ids, mask and segment_ids of "
        "one shape" in str(error.value)
    ), str(error.value)
