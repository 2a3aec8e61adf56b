"""TaggingReader on the real Penn Treebank sample (word/TAG lines) and hand-written CoNLL-2003-style fixtures.

The alignment reference is Google's own WordPiece tokenizer (`FullTokenizer`
of bert-tensorflow) applied word by word, the recipe BERT's NER/POS
fine-tuning uses: each word's tag on its first piece, nothing on the rest.
"""

import logging
import os

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.data.readers import MalformedRowError, TaggingReader
from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.tokenization.vocabulary import special_token_ids
from tests.data_readers.google_reference import google_tokenization
from tests.harness import tiny_backbone_config

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(TESTS, "fixtures", "readers")
VOCAB = os.path.join(os.path.dirname(TESTS), "data", "minilm", "vocab.txt")
WSJ = os.path.join(os.path.dirname(TESTS), "data", "corpora", "tagged-en-wsj.txt")
LENGTH, SENTENCES = 64, 300


@pytest.fixture(scope="module")
def pre():
    if not os.path.exists(VOCAB):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    return BertPreprocessor(VOCAB, sequence_length=LENGTH)


def _all(dataset):
    parts = list(dataset)
    return tuple(
        {k: np.concatenate([p[0][k].numpy() for p in parts]) for k in parts[0][0]}
        if i == 0
        else np.concatenate([p[i].numpy() for p in parts])
        for i in range(3)
    )


def test_wsj_tags_on_first_pieces_like_google(pre):
    reader = TaggingReader(pre, file_format="word/tag", batch_size=64)
    x, y, w = _all(reader.read(WSJ, max_sentences=SENTENCES))
    with open(WSJ, encoding="utf-8") as f:
        sentences = [[item.rsplit("/", 1) for item in line.split()] for line in f if line.strip()][:SENTENCES]
    assert reader.report.examples == SENTENCES and reader.labels.labels == sorted(
        {t for s in sentences for _, t in s}
    )
    google = google_tokenization().FullTokenizer(vocab_file=VOCAB, do_lower_case=True)
    cls, sep = google.vocab["[CLS]"], google.vocab["[SEP]"]
    truncated = lost = 0
    for i, words in enumerate(sentences):
        ids, tags, weights = [cls], [0], [0.0]
        kept = 0
        for word, tag in words:
            pieces = google.convert_tokens_to_ids(google.tokenize(word))
            room = LENGTH - 2 - (len(ids) - 1)
            if room <= 0:
                break
            ids += pieces[:room]
            tags += [reader.labels.index(tag)] + [0] * (len(pieces[:room]) - 1)
            weights += [1.0] + [0.0] * (len(pieces[:room]) - 1)
            kept += 1
        if kept < len(words) or len(ids) - 1 < sum(len(google.tokenize(wd)) for wd, _ in words):
            truncated += 1
            lost += len(words) - kept
        ids.append(sep)
        pad = LENGTH - len(ids)
        np.testing.assert_array_equal(x["token_ids"][i], ids + [0] * pad)
        np.testing.assert_array_equal(y[i], tags + [0] * (pad + 1))
        np.testing.assert_array_equal(w[i], weights + [0.0] * (pad + 1))
        np.testing.assert_array_equal(x["padding_mask"][i], [1] * len(ids) + [0] * pad)
        # Read back: the weighted positions carry the sentence's tags, in order.
        assert [reader.labels.labels[t] for t in y[i][w[i] == 1]] == [t for _, t in words[:kept]]
    assert not x["segment_ids"].any()
    assert reader.report.counters["truncated_sequences"] == truncated > 0
    assert reader.report.counters["truncated_words"] == lost > 0


def test_wsj_per_batch_padding(pre):
    reader = TaggingReader(
        BertPreprocessor(VOCAB, sequence_length=None), file_format="word/tag", batch_size=50
    )
    widths = []
    for x, y, w in reader.read(WSJ, max_sentences=200):
        mask = x["padding_mask"].numpy()
        assert mask[:, -1].any() and x["token_ids"].shape == y.shape == w.shape
        widths.append(mask.shape[1])
    assert len(set(widths)) > 1 and max(widths) > LENGTH
    assert reader.report.counters["truncated_sequences"] == 0


def test_conll_columns_and_docstart(pre):
    reader = TaggingReader(pre)
    x, y, w = _all(reader.read(os.path.join(FIXTURES, "ner_train.conll")))
    assert reader.report.examples == 3  # -DOCSTART- lines are document boundaries, not words
    assert reader.labels.labels == ["B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER", "O"]
    second = [reader.labels.labels[t] for t in y[1][w[1] == 1]]
    assert second == ["O", "B-ORG", "I-ORG", "O", "B-ORG", "O", "O"]
    # "€2.4bn" is several pieces; only the first is weighted.
    pieces = pre.tokenize(["€2.4bn"]).to_list()[0]
    start = list(x["token_ids"][1]).index(pieces[0])
    np.testing.assert_array_equal(w[1][start : start + len(pieces)], [1] + [0] * (len(pieces) - 1))
    pos = TaggingReader(pre, tag_column=1)
    _, y, w = _all(pos.read(os.path.join(FIXTURES, "ner_train.conll")))
    assert [pos.labels.labels[t] for t in y[2][w[2] == 1]] == [
        "NN",
        "VBD",
        "NN",
        "IN",
        "NNP",
        "NNP",
        "IN",
        "NNP",
        ".",
    ]


def test_conll_malformed_sentences(pre, caplog):
    train = TaggingReader(pre)
    train.read(os.path.join(FIXTURES, "ner_train.conll"))
    path = os.path.join(FIXTURES, "ner_dev_bad.conll")
    with pytest.raises(MalformedRowError) as info:
        TaggingReader(pre, labels=train.labels).read(path)
    assert (info.value.path, info.value.line, info.value.kind) == (path, 9, "missing_tag")
    assert "expected 'word TAG' columns (tag in column -1). Received: 'Karenina'" in str(info.value)
    reader = TaggingReader(pre, labels=train.labels, on_error="skip")
    with caplog.at_level(logging.WARNING, logger="keras_bert_impl.data.readers"):
        _, y, w = _all(reader.read(path))
    assert reader.report.examples == 1
    assert reader.report.skipped_by_kind == {"missing_tag": 1, "unknown_label": 1}
    assert [e.line for e in reader.report.errors] == [9, 15]
    assert "unknown label 'B-GPE'" in reader.report.errors[1].reason
    assert "skipped 2 malformed rows" in caplog.text
    assert [train.labels.labels[t] for t in y[0][w[0] == 1]] == ["B-LOC", "O", "O", "B-ORG", "O", "O"]


def test_conll_words_with_spaces_and_undecodable_lines_drop_no_word_alone(pre, tmp_path):
    """str.split() cut "1\\u00a0000" at its no-break space and "New York" (tab-separated) at its space,
    keeping the first piece as the word; a line that was not UTF-8 was skipped alone, leaving its
    sentence one word short."""
    tabbed = tmp_path / "tabbed.conll"
    tabbed.write_text("Visit\tO\nNew York\tB-LOC\nfor\tO\n1\u00a0000\tNUM\n\n", encoding="utf-8")
    reader = TaggingReader(pre)
    x, y, w = _all(reader.read(tabbed))
    # Every piece of both words is in the row: "York" and "000" were lost.
    want = pre.tokenize(["Visit New York for 1\u00a0000"]).to_list()[0]
    assert [t for t in x["token_ids"][0] if t not in special_token_ids(pre.vocabulary).values()] == want
    assert [reader.labels.labels[t] for t in y[0][w[0] == 1]] == ["O", "B-LOC", "O", "NUM"]
    spaced = tmp_path / "spaced.conll"
    spaced.write_text("Visit O\nNew York B-LOC\nfor O\n\nIt O\nrains O\n\n", encoding="utf-8")
    with pytest.raises(
        MalformedRowError,
        match=r"spaced.conll:2: has 3 columns where the file's first line has 2: a "
        r"word holding a space\?",
    ):
        TaggingReader(pre).read(spaced)
    latin1 = tmp_path / "latin1.conll"
    latin1.write_bytes(b"EU B-ORG\nrejects O\nGer\xe9man B-MISC\ncall O\n\nPeter B-PER\n\n")
    reader = TaggingReader(pre, on_error="skip")
    reader.read(latin1)
    assert reader.report.examples == 1 and reader.report.skipped_by_kind == {"invalid_utf8": 1}


def test_word_tag_malformed_line(pre, tmp_path):
    path = tmp_path / "tagged.txt"
    path.write_text(
        "The/DT cat/NN sat/VBD ./.\nA/DT dog/NN barked ./.\nIt/PRP ran/VBD ./.\n", encoding="utf-8"
    )
    with pytest.raises(MalformedRowError, match=r"tagged.txt:2: 'barked' is not word/TAG"):
        TaggingReader(pre, file_format="word/tag").read(path)
    reader = TaggingReader(pre, file_format="word/tag", on_error="skip")
    reader.read(path)
    assert reader.report.examples == 2 and reader.report.skipped == 1


def test_arguments_are_checked(pre):
    with pytest.raises(ValueError, match="file_format='iob'"):
        TaggingReader(pre, file_format="iob")
    with pytest.raises(ValueError, match="tag_column=0"):
        TaggingReader(pre, tag_column=0)
    with pytest.raises(ValueError, match="max_sentences=0"):
        TaggingReader(pre).read(WSJ, max_sentences=0)


def test_fits_a_token_classifier(pre):
    reader = TaggingReader(pre, file_format="word/tag", batch_size=16)
    dataset = reader.read(WSJ, max_sentences=32)
    backbone = kb.BertBackbone(
        **tiny_backbone_config(vocabulary_size=len(pre.vocabulary), max_sequence_length=LENGTH, num_layers=1)
    )
    model = kb.BertTokenClassifier(backbone, num_classes=reader.num_classes)
    history = model.fit(dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    keras.backend.clear_session()
