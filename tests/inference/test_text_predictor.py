"""TextPredictor: length-bucketed batches give what padding every text to the sequence length
gives (issue 19: within 1e-5), on the real MiniLM and real MR sentences, in input order."""

import csv
import os

import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.inference import TextPredictor
from keras_bert_impl.tokenization import BertPreprocessor

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MR = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee2.csv")


@pytest.fixture(scope="module")
def sentences():
    with open(MR, encoding="utf-8-sig", newline="") as f:
        texts = [row[1] for row in csv.reader(f)][:300]
    # One text longer than the sequence length: cut, as padding to it would cut it.
    return texts + [" ".join(texts[:12]), "", "a"]


@pytest.mark.parametrize("pooling, multi_label", [("mean", False), ("pooled", True)])
@pytest.mark.slow  # about 20 s or more: MiniLM over MR sentences, bucketed and padded
def test_buckets_equal_padding_to_the_sequence_length(minilm, sentences, pooling, multi_label):
    model = kb.BertClassifier(minilm, num_classes=3, pooling=pooling, multi_label=multi_label)
    predictor = TextPredictor(model, sequence_length=128, batch_size=32)
    seen = []
    got = predictor.predict(sentences, chunk_size=128, progress=seen.append)
    assert sum(seen) == len(sentences)
    x = BertPreprocessor(minilm.vocabulary, lowercase=minilm.lowercase, sequence_length=128)(sentences)
    name = "logits"
    want = np.concatenate(
        [
            np.asarray(model.predict_on_batch({k: v[i : i + 64] for k, v in x.items()})[name])
            for i in range(0, len(sentences), 64)
        ]
    )
    assert got[name].shape == want.shape
    np.testing.assert_allclose(got[name], want, atol=1e-5)


def test_pairs_and_bad_arguments(minilm, sentences):
    model = kb.BertClassifier(minilm, num_classes=2)
    a, b = sentences[:40], sentences[40:80]
    got = TextPredictor(model, sequence_length=64, batch_size=16).predict(a, b)["logits"]
    x = BertPreprocessor(minilm.vocabulary, lowercase=minilm.lowercase, sequence_length=64)((a, b))
    np.testing.assert_allclose(got, np.asarray(model.predict_on_batch(x)["logits"]), atol=1e-5)
    with pytest.raises(ValueError, match=r"sequence_length 513 is outside 3\.\.512"):
        TextPredictor(model, sequence_length=513)
    with pytest.raises(ValueError, match="TextPredictor takes a BertClassifier"):
        TextPredictor(minilm)
    with pytest.raises(ValueError, match="texts_b must have one entry per text"):
        TextPredictor(model).predict(a, b[:3])


def test_batches_are_what_predict_runs(minilm, sentences):
    model = kb.BertClassifier(minilm, num_classes=2)
    predictor = TextPredictor(model, sequence_length=64, batch_size=16)
    batches = list(predictor.batches(sentences))
    assert sorted(np.concatenate([rows for rows, *_ in batches]).tolist()) == list(range(len(sentences)))
    lengths = np.asarray(
        BertPreprocessor(minilm.vocabulary, lowercase=minilm.lowercase, sequence_length=64)(sentences)[
            "padding_mask"
        ]
    ).sum(axis=1)
    widths = [ids.shape[1] for _, ids, _, _ in batches]
    # Each batch as wide as its longest row, the widest first.
    assert widths == [int(lengths[rows].max()) for rows, *_ in batches] and widths == sorted(
        widths, reverse=True
    )
    rows, *ids = batches[0]
    np.testing.assert_allclose(
        np.asarray(predictor._forward(*ids)["logits"]),
        predictor.predict([sentences[i] for i in rows])["logits"],
        atol=1e-5,
    )


def test_small_calls_tokenize_in_plain_python_with_the_same_ids(minilm, sentences):
    """A call of at most PLAIN_TOKENIZER_MAX_TEXTS str texts skips the in-graph tokenizer: the ids
    are BertPreprocessor's bit for bit (singles, a text over the length, empty text, pairs), and
    the logits those of the same texts in a large call (TensorFlow's tokenizer) within 1e-5."""
    from keras_bert_impl.inference.text_predictor import PLAIN_TOKENIZER_MAX_TEXTS

    model = kb.BertClassifier(minilm, num_classes=2)
    predictor = TextPredictor(model, sequence_length=64, batch_size=16)
    preprocessor = BertPreprocessor(minilm.vocabulary, lowercase=minilm.lowercase, sequence_length=64)
    small = sentences[:5] + sentences[-3:]  # the last three: over the length, "", "a"
    assert len(small) == PLAIN_TOKENIZER_MAX_TEXTS
    for texts, texts_b in ((small, None), (small[:4], small[4:]), ([small[5]], None)):
        want = preprocessor(texts if texts_b is None else (texts, texts_b))
        batches = list(predictor.batches(texts, texts_b))
        for rows, *ids in batches:
            for got, key in zip(ids, ("token_ids", "segment_ids", "padding_mask")):
                np.testing.assert_array_equal(got, np.asarray(want[key])[rows, : got.shape[1]], err_msg=key)
    assert predictor._plain_tokenizer is not None  # the route was taken
    # Bytes take TensorFlow's route (the plain tokenizer reads str only), with the same ids.
    (rows, *ids), *_ = predictor.batches([t.encode() for t in small[:2]])
    np.testing.assert_array_equal(
        ids[0], np.asarray(preprocessor(small[:2])["token_ids"])[rows, : ids[0].shape[1]]
    )
    large = predictor.predict(small + sentences[5:30])["logits"][: len(small)]
    np.testing.assert_allclose(predictor.predict(small)["logits"], large, atol=1e-5)
