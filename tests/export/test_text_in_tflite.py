"""The text-in .tflite (keras_bert_impl_export.text_in_tflite): strings in, the tokenizer inside.

Run through LiteRT with tensorflow-text's registrar, it must give BertPreprocessor's ids and
the Keras model's outputs (<= 1e-4) on 500 real MR sentences plus the hard cases of
tests/fixtures/tokenization_hard_cases.json, and hold no custom op but tensorflow-text's
three. The real MiniLM is converted once per session; pairs, spans and tagging use a tiny
encoder over MiniLM's vocabulary (the ids are what those tests check; a tiny model converts
in seconds).
"""

import csv
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.models import (
    BertBackbone,
    BertClassifier,
    BertEmbedder,
    BertSpanLabeler,
    BertTokenClassifier,
)
from keras_bert_impl.tokenization import BertPreprocessor, read_vocabulary
from keras_bert_impl_export.text_in_tflite import (
    TEXT_IN_CUSTOM_OPS,
    convert_text_in,
    custom_op_names,
    op_names,
    run_text_in,
    text_in_interpreter,
)
from tests.conftest import DATA, REPO

MR = os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv")
HARD_CASES = os.path.join(REPO, "tests", "fixtures", "tokenization_hard_cases.json")
LENGTH = 64
BATCH = 64
ID_KEYS = ("token_ids", "segment_ids", "padding_mask")

with open(HARD_CASES, encoding="utf-8") as f:
    CASES = json.load(f)["cases"]
HARD_SINGLE = [c["text"] for c in CASES if "text_b" not in c]
HARD_PAIRS = [(c["text"], c["text_b"]) for c in CASES if "text_b" in c]


def _mr_sentences(count):
    with open(MR, encoding="utf-8-sig", newline="") as f:
        return [text for _, text in csv.reader(f)][:count]


def _run_batched(interpreter, texts, texts_b=None):
    """LiteRT outputs for all `texts`, BATCH at a time, concatenated."""
    outs = [
        run_text_in(interpreter, texts[i : i + BATCH], None if texts_b is None else texts_b[i : i + BATCH])
        for i in range(0, len(texts), BATCH)
    ]
    return {key: np.concatenate([o[key] for o in outs]) for key in outs[0]}


def _reference(model, sequence_length, texts, texts_b=None):
    """BertPreprocessor's ids and the Keras model's outputs on them."""
    pre = BertPreprocessor.from_model(model, sequence_length=sequence_length)
    segments = tf.constant(texts) if texts_b is None else (tf.constant(texts), tf.constant(texts_b))
    x = {key: value.numpy() for key, value in pre(segments).items()}
    outputs = model.predict(x, batch_size=BATCH, verbose=0)
    return x, outputs


def _assert_matches(got, x, outputs, tolerance=1e-4):
    for key in ID_KEYS:
        differ = np.flatnonzero((got[key] != x[key]).any(axis=1))
        assert differ.size == 0, f"{key} differ from BertPreprocessor in rows {differ[:10].tolist()}"
    for key, expected in outputs.items():
        assert got[key].shape == expected.shape, key
        assert np.abs(got[key] - expected).max() <= tolerance, (key, np.abs(got[key] - expected).max())


def _assert_ops(flatbuffer):
    ops = op_names(flatbuffer)
    assert sorted(custom_op_names(flatbuffer)) == sorted(TEXT_IN_CUSTOM_OPS), ops
    assert not [op for op in ops if op.startswith("Flex")], ops
    assert "GELU" in ops and "FULLY_CONNECTED" in ops


@pytest.fixture(scope="session")
def classifier(minilm):
    # Logits out (no activation); mean pooling, the head sentence-transformers checkpoints fit.
    model = BertClassifier(minilm, num_classes=2, label_names=["negative", "positive"], pooling="mean")
    return model, convert_text_in(model, sequence_length=LENGTH)


@pytest.fixture(scope="session")
def tiny_backbone():
    vocabulary = read_vocabulary(os.path.join(DATA, "minilm", "vocab.txt"))
    backbone = BertBackbone(
        vocabulary_size=len(vocabulary),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=64,
    )
    backbone.set_vocabulary(vocabulary, lowercase=True)
    return backbone


@pytest.mark.slow
def test_classifier_matches_keras_on_mr_and_hard_cases(classifier):
    model, flatbuffer = classifier
    _assert_ops(flatbuffer)
    texts = _mr_sentences(500) + HARD_SINGLE
    assert len(texts) >= 500 + 80
    got = _run_batched(text_in_interpreter(flatbuffer, num_threads=2), texts)
    x, outputs = _reference(model, LENGTH, texts)
    assert set(got) == {"logits", *ID_KEYS}
    # Some MR sentences and hard cases run past LENGTH: truncation is compared too.
    assert (x["padding_mask"][:, -1] == 1).sum() >= 3
    _assert_matches(got, x, outputs)


@pytest.mark.slow
def test_embedder_matches_keras(minilm):
    model = BertEmbedder(minilm, pooling="mean", normalize=True)
    flatbuffer = convert_text_in(model, sequence_length=32)
    _assert_ops(flatbuffer)
    texts = _mr_sentences(128) + HARD_SINGLE
    got = _run_batched(text_in_interpreter(flatbuffer, num_threads=2), texts)
    x, outputs = _reference(model, 32, texts)
    assert set(got) == {"embeddings", *ID_KEYS}
    _assert_matches(got, x, outputs)


@pytest.mark.parametrize("length", [15, 16])  # pair budgets 12 and 13: even and odd
def test_pair_classifier_matches_keras(tiny_backbone, length):
    model = BertClassifier(tiny_backbone, num_classes=3)
    flatbuffer = convert_text_in(model, sequence_length=length, pair=True)
    _assert_ops(flatbuffer)
    mr = _mr_sentences(200)
    texts_a = [a for a, _ in HARD_PAIRS] + mr[0::2] + ["", "a short one"]
    texts_b = [b for _, b in HARD_PAIRS] + mr[1::2] + ["", ""]
    got = _run_batched(text_in_interpreter(flatbuffer), texts_a, texts_b)
    x, outputs = _reference(model, length, texts_a, texts_b)
    assert set(got) == {"logits", *ID_KEYS}
    _assert_matches(got, x, outputs)
    assert got["token_ids"][-2, :4].tolist() == [101, 102, 102, 0]  # two empty texts


@pytest.mark.slow  # about 20 s or more: converts two heads to text-in TFLite
def test_span_labeler_and_tagger_match_keras(tiny_backbone):
    spans = BertSpanLabeler(tiny_backbone)
    flatbuffer = convert_text_in(spans, sequence_length=16)
    _assert_ops(flatbuffer)
    mr = _mr_sentences(64)
    got = run_text_in(flatbuffer, mr[0::2], mr[1::2])
    assert set(got) == {"start_logits", "end_logits", *ID_KEYS}
    _assert_matches(got, *_reference(spans, 16, mr[0::2], mr[1::2]))

    # A tagger at 8 tokens: nearly every row truncated, long words cut by the length.
    tagger = BertTokenClassifier(tiny_backbone, num_classes=5)
    flatbuffer = convert_text_in(tagger, sequence_length=8)
    texts = HARD_SINGLE + mr
    got = run_text_in(flatbuffer, texts)
    _assert_matches(got, *_reference(tagger, 8, texts))


@pytest.mark.slow
def test_serving_time_edge_cases(classifier):
    model, flatbuffer = classifier
    interpreter = text_in_interpreter(flatbuffer)

    # An empty batch: outputs with 0 rows, no error.
    empty = run_text_in(interpreter, [])
    assert {key: value.shape for key, value in empty.items()} == {
        "logits": (0, 2),
        "token_ids": (0, LENGTH),
        "segment_ids": (0, LENGTH),
        "padding_mask": (0, LENGTH),
    }
    # An empty string: [CLS] [SEP], and the model's logits for exactly that.
    long_text = " ".join(["wonderful"] * 200)
    got = run_text_in(interpreter, ["", long_text])
    x, outputs = _reference(model, LENGTH, ["", long_text])
    _assert_matches(got, x, outputs)
    assert got["token_ids"][0, :3].tolist() == [101, 102, 0] and got["padding_mask"][0].sum() == 2
    # Longer than the sequence length: truncated to [CLS] + 62 pieces + [SEP].
    assert got["padding_mask"][1].sum() == LENGTH and got["token_ids"][1, -1] == 102
    assert (got["token_ids"][1, 1:-1] == got["token_ids"][1, 1]).all()

    # Invalid UTF-8: BertPreprocessor raises; the .tflite makes each word holding bad bytes one [UNK].
    bad = [b"caf\xc3", b"abc \xff\xfe def"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8"):
        BertPreprocessor.from_model(model, sequence_length=LENGTH)(tf.constant(bad))
    got = run_text_in(interpreter, bad)
    assert got["token_ids"][0, :4].tolist() == [101, 100, 102, 0]
    abc, def_ = (BertPreprocessor.from_model(model).tokenize_lists(["abc def"]))[0]
    assert got["token_ids"][1, :6].tolist() == [101, abc, 100, def_, 102, 0]

    with pytest.raises(ValueError, match="text_b"):
        run_text_in(interpreter, ["a"], ["b"])


def test_bad_arguments(tiny_backbone):
    classifier = BertClassifier(tiny_backbone, num_classes=2)
    with pytest.raises(
        ValueError,
        match=r"sequence_length 65 is outside 3\.\.64: .* at most the model's "
        r"max_sequence_length=64 \(its position embeddings\)\. Pass sequence_length from 3 to 64\.",
    ):
        convert_text_in(classifier, sequence_length=65)
    with pytest.raises(ValueError, match=r"sequence_length 2 is outside 3\.\.64: at least 3 wordpieces"):
        convert_text_in(classifier, sequence_length=2)
    with pytest.raises(ValueError, match="Received: pair=True for a BertEmbedder"):
        convert_text_in(BertEmbedder(tiny_backbone), sequence_length=16, pair=True)
    with pytest.raises(ValueError, match="Received: model=BertBackbone"):
        convert_text_in(tiny_backbone, sequence_length=16)
    bare = BertBackbone(
        vocabulary_size=50,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
    )
    with pytest.raises(ValueError, match="carries no vocabulary"):
        convert_text_in(BertClassifier(bare, num_classes=2), sequence_length=16)
