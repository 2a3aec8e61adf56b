"""ClassificationReader on the real MR sentences and hand-written CSV/TSV/JSONL fixtures.

Fixtures in tests/fixtures/readers/ are written by hand (no GLUE download
exists here): news headlines with topic labels (multi-label JSONL), RTE-style
entailment pairs (TSV), STS-style scored pairs (CSV with a quoted line
break), intents with integer ids, reviews with an unseen label, and rows
with broken JSON or a missing column.
"""

import csv
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.data.readers import ClassificationReader, LabelVocabulary, MalformedRowError
from keras_bert_impl.tokenization import BertPreprocessor

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(TESTS, "fixtures", "readers")
MR = os.path.join(os.path.dirname(TESTS), "data", "corpora", "polarity-en-pang&lee2.csv")
LENGTH = 32


@pytest.fixture(scope="module")
def pre():
    path = os.path.join(os.path.dirname(TESTS), "data", "minilm", "vocab.txt")
    if not os.path.exists(path):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    return BertPreprocessor(path, sequence_length=LENGTH)


def _all(dataset):
    xs, ys = zip(*[(x, y) for x, y in dataset])
    return {k: np.concatenate([x[k].numpy() for x in xs]) for k in xs[0]}, np.concatenate(
        [y.numpy() for y in ys]
    )


def fixture(name):
    return os.path.join(FIXTURES, name)


def test_mr_sentences_headerless_csv_with_bom(pre, tmp_path):
    reader = ClassificationReader(pre, header=False, column_names=("label", "text"), batch_size=500)
    x, y = _all(reader.read(MR))
    with open(MR, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    # Numeric class names sort as numbers: -1 -> 0, 1 -> 1; the BOM is not part of the first label.
    assert reader.labels.labels == ["-1", "1"] and reader.num_classes == 2
    assert reader.report.examples == len(rows) == 4000 and reader.report.skipped == 0
    np.testing.assert_array_equal(y, [0 if label == "-1" else 1 for label, _ in rows])
    assert x["token_ids"].shape == (4000, LENGTH) and x["token_ids"].dtype == np.int32
    expected = pre(tf.constant([rows[0][1], rows[-1][1]]))
    np.testing.assert_array_equal(x["token_ids"][[0, -1]], expected["token_ids"].numpy())
    np.testing.assert_array_equal(x["padding_mask"][[0, -1]], expected["padding_mask"].numpy())
    # The label vocabulary travels with the model as a small JSON file.
    reader.labels.save(tmp_path / "labels.json")
    assert LabelVocabulary.load(tmp_path / "labels.json") == reader.labels


def test_mr_line_numbers_count_quoted_line_breaks(pre):
    # Every MR record spans two physical lines (its text ends with a quoted newline),
    # so the first negative row, record 2001, starts on line 4001.
    reader = ClassificationReader(pre, header=False, column_names=("label", "text"), labels=["1"])
    with pytest.raises(MalformedRowError) as info:
        reader.read(MR)
    assert (info.value.line, info.value.kind) == (4001, "unknown_label")
    assert "unknown label '-1'; the vocabulary has ['1'] (1 labels)" in str(info.value)


def test_jsonl_multi_label(pre):
    reader = ClassificationReader(pre, multi_label=True)
    x, y = _all(reader.read(fixture("topics_train.jsonl")))
    assert reader.labels.labels == ["economy", "politics", "science", "weather"]
    assert reader.report.examples == 8 and reader.report.skipped == 0  # the blank line is not a row
    assert y.dtype == np.float32 and y.shape == (8, 4)
    np.testing.assert_array_equal(y[1], [1, 1, 0, 0])  # ["economy", "politics"]
    np.testing.assert_array_equal(y[6], [0, 1, 0, 0])  # "politics", a bare string
    # The dev file maps through the training vocabulary: a delimited string, a list, no labels at all.
    x, y = _all(reader.read(fixture("topics_dev.jsonl")))
    assert reader.labels.labels == ["economy", "politics", "science", "weather"]
    np.testing.assert_array_equal(y, [[1, 0, 0, 1], [0, 0, 1, 1], [0, 0, 0, 0]])


def test_tsv_sentence_pairs(pre):
    reader = ClassificationReader(pre, text_b_column="text_b")
    x, y = _all(reader.read(fixture("nli_pairs.tsv")))
    with open(fixture("nli_pairs.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    # TSV is read without quote processing: '"Hamlet" was ...' keeps its quotes.
    assert rows[2][0].startswith('"Hamlet"')
    expected = pre((tf.constant([r[0] for r in rows]), tf.constant([r[1] for r in rows])))
    for key in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(x[key], expected[key].numpy())
    assert x["segment_ids"].max() == 1
    assert reader.labels.labels == ["entailment", "not_entailment"]
    np.testing.assert_array_equal(y, [0, 1, 0, 1])


def test_csv_float_labels_and_quoted_line_break(pre):
    reader = ClassificationReader(pre, text_b_column="text_b", label_mode="float")
    x, y = _all(reader.read(fixture("sts_pairs.csv")))
    assert y.dtype == np.float32 and reader.num_classes == 1 and reader.labels is None
    np.testing.assert_allclose(y, [4.2, 4.6, 0.0, 3.8])
    expected = pre(
        (
            tf.constant(["The senate approved the bill on Friday.\nIt now goes to the president."]),
            tf.constant(["The bill was passed by the senate."]),
        )
    )
    np.testing.assert_array_equal(x["token_ids"][3], expected["token_ids"].numpy()[0])


def test_index_labels_out_of_range(pre):
    with pytest.raises(MalformedRowError) as info:
        ClassificationReader(pre, label_mode="index", num_classes=3).read(fixture("intent_ids.csv"))
    err = info.value
    assert (err.path, err.line, err.kind) == (fixture("intent_ids.csv"), 5, "label_out_of_range")
    assert "label '5' is out of range for num_classes=3 (ids 0..2)" in str(err)
    reader = ClassificationReader(pre, label_mode="index", num_classes=3, on_error="skip")
    x, y = _all(reader.read(fixture("intent_ids.csv")))
    np.testing.assert_array_equal(y, [0, 1, 2])
    assert reader.report.skipped_by_kind == {"label_out_of_range": 2}
    assert [e.line for e in reader.report.errors] == [5, 6]


def test_unknown_label_in_validation(pre, caplog):
    reader = ClassificationReader(pre)
    reader.read(fixture("sentiment_train.csv"))
    assert reader.labels.labels == ["neg", "neutral", "pos"]
    with pytest.raises(MalformedRowError) as info:
        reader.read(fixture("sentiment_dev_unknown_label.csv"))
    assert (info.value.line, info.value.kind) == (3, "unknown_label")
    assert "unknown label 'negative'; the vocabulary has ['neg', 'neutral', 'pos']" in info.value.reason
    reader.on_error = "skip"
    with caplog.at_level(logging.WARNING, logger="keras_bert_impl.data.readers"):
        _, y = _all(reader.read(fixture("sentiment_dev_unknown_label.csv")))
    np.testing.assert_array_equal(y, [2, 2])
    assert reader.report.skipped == 1 and "skipped 1 malformed rows (unknown_label: 1)" in caplog.text
    assert reader.labels.labels == ["neg", "neutral", "pos"]  # the dev file did not rebuild it


def test_bad_json_and_missing_column(pre, caplog):
    path = fixture("bad_rows.jsonl")
    with pytest.raises(MalformedRowError) as info:
        ClassificationReader(pre).read(path)
    assert (info.value.path, info.value.line, info.value.kind) == (path, 2, "bad_json")
    assert str(info.value).startswith(f"{path}:2: invalid JSON (Expecting ',' delimiter")
    reader = ClassificationReader(pre, on_error="skip")
    with caplog.at_level(logging.WARNING, logger="keras_bert_impl.data.readers"):
        _, y = _all(reader.read(path))
    assert reader.report.examples == 2 and reader.report.skipped == 2
    assert reader.report.skipped_by_kind == {"bad_json": 1, "missing_column": 1}
    assert (
        reader.report.errors[1].line == 3
        and "missing column 'text' (the row has ['label', 'sentence'])" in reader.report.errors[1].reason
    )
    assert "skipped 2 malformed rows" in caplog.text
    assert "on_error='skip'" not in caplog.text  # the hint of the raise mode offers what is in force
    np.testing.assert_array_equal(y, [1, 0])  # neg, pos


def test_csv_shape_errors(pre, tmp_path):
    no_text = tmp_path / "no_text.csv"
    no_text.write_text("sentence,label\nfine,pos\n", encoding="utf-8")
    for on_error in ("raise", "skip"):  # a header problem concerns every row: never skipped
        with pytest.raises(
            MalformedRowError,
            match=r"no_text.csv:1: the header \['sentence', 'label'\] lacks the column\(s\) \['text'\]",
        ):
            ClassificationReader(pre, on_error=on_error).read(no_text)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text(
        "text,label\nfine film,pos\nunquoted, comma,neg\nno label here\nlast one,neg\n", encoding="utf-8"
    )
    reader = ClassificationReader(pre, on_error="skip")
    _, y = _all(reader.read(ragged))
    assert reader.report.skipped_by_kind == {"field_count": 1, "missing_column": 1}
    assert [e.line for e in reader.report.errors] == [3, 4]
    assert "an unquoted delimiter in the text?" in reader.report.errors[0].reason
    np.testing.assert_array_equal(y, [1, 0])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="gave no examples"):
        ClassificationReader(pre).read(empty)


def test_headers_that_would_be_misread_are_refused(pre, tmp_path):
    """A header read as data (header=False on a file that has one) trained on a class named
    "label"; a column named twice kept the last of them: both without a word before."""
    with_header = tmp_path / "with_header.csv"
    with_header.write_text("Label,Text\npos,fine film\nneg,dull\n", encoding="utf-8")
    for on_error in ("raise", "skip"):
        with pytest.raises(
            MalformedRowError,
            match=r"with_header.csv:1: the first row \['Label', 'Text'\] is a header "
            r"\(the column names\), but the reader was told the file has none "
            r"\(header=False\): read it with header=True \(without column_names=\[\.\.\.\]\)",
        ):
            ClassificationReader(pre, header=False, column_names=("label", "text"), on_error=on_error).read(
                with_header
            )
    _, y = _all(ClassificationReader(pre, text_column="Text", label_column="Label").read(with_header))
    np.testing.assert_array_equal(y, [1, 0])  # neg, pos: read with its header, it is fine
    twice = tmp_path / "twice.csv"
    twice.write_text("id,text,label,text\n1,fine film,pos,note a\n", encoding="utf-8")
    with pytest.raises(
        MalformedRowError,
        match=r"twice.csv:1: the header \['id', 'text', 'label', 'text'\] names the "
        r"column\(s\) \['text'\] more than once",
    ):
        ClassificationReader(pre, on_error="skip").read(twice)
    with pytest.raises(
        ValueError, match=r"column_names names a column twice.*column_names=\['text', 'label', 'text'\]"
    ):
        ClassificationReader(pre, header=False, column_names=("text", "label", "text"))


def test_multi_label_fields_written_as_lists(pre, tmp_path):
    """pandas' to_csv of a list column writes "['sport', 'economy']": split on "," it gave classes
    like "['sport'". JSON lists read too; a bracketed field that is neither is refused. A text left
    empty (an example of [CLS] [SEP] alone) and a null label are refused as what they are."""
    table = tmp_path / "listed.csv"
    with open(table, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(
            [
                ["text", "labels"],
                ["goal in extra time", "['sport']"],
                ["budget vote delayed", '["politics", "economy"]'],
                ["striker joins club", "sport,economy"],
            ]
        )
    reader = ClassificationReader(pre, multi_label=True)
    _, y = _all(reader.read(table))
    assert reader.labels.labels == ["economy", "politics", "sport"]
    np.testing.assert_array_equal(y, [[0, 0, 1], [1, 1, 0], [1, 0, 1]])
    broken = tmp_path / "broken.csv"
    broken.write_text(
        'text,labels\nfine,"[sport, economy"\nok,"[sport economy]"\ngood,sport\n', encoding="utf-8"
    )
    reader = ClassificationReader(pre, multi_label=True, on_error="skip")
    reader.read_examples(broken)
    assert reader.report.skipped_by_kind == {"bad_label": 2} and [e.line for e in reader.report.errors] == [
        2,
        3,
    ]
    assert all("looks like a list but reads as neither JSON" in e.reason for e in reader.report.errors)
    empty = tmp_path / "empty_text.csv"
    empty.write_text('text,label\nfine,pos\n"  ",neg\nflat,neg\n', encoding="utf-8")
    with pytest.raises(
        MalformedRowError, match=r"empty_text.csv:3: column 'text' is empty: give the row its text"
    ):
        ClassificationReader(pre).read(empty)
    null = tmp_path / "null.jsonl"
    null.write_text('{"text": "fine", "label": null}\n', encoding="utf-8")
    with pytest.raises(
        MalformedRowError, match=r"null.jsonl:1: column 'label' is null: give the row its label"
    ):
        ClassificationReader(pre).read(null)


def test_arguments_are_checked(pre):
    with pytest.raises(ValueError, match="label_mode='ids'"):
        ClassificationReader(pre, label_mode="ids")
    with pytest.raises(ValueError, match="num_classes=None"):
        ClassificationReader(pre, label_mode="index")
    with pytest.raises(ValueError, match="header=False"):
        ClassificationReader(pre, column_names=("label", "text"))
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['label'\]"):
        ClassificationReader(pre, header=False, column_names=("polarity", "text"))
    with pytest.raises(ValueError, match="multi_label=True needs class labels"):
        ClassificationReader(pre, multi_label=True, label_mode="float")
    with pytest.raises(ValueError, match="batch_size=0"):
        ClassificationReader(pre, batch_size=0)
    with pytest.raises(ValueError, match=r"file_format= one of \['csv', 'tsv', 'jsonl'\]"):
        ClassificationReader(pre).read(os.path.join(FIXTURES, "ner_train.conll"))
    with pytest.raises(ValueError, match="distinct"):
        LabelVocabulary(["a", "a"])


def test_invalid_utf8_names_the_line(pre, tmp_path):
    jsonl = tmp_path / "latin1.jsonl"
    jsonl.write_bytes(
        b'{"text": "fine", "label": "a"}\n{"text": "caf\xe9 au lait", "label": "b"}\n{"text": "ok", '
        b'"label": "a"}\n'
    )
    with pytest.raises(MalformedRowError, match=r"latin1.jsonl:2: not valid UTF-8"):
        ClassificationReader(pre).read(jsonl)
    reader = ClassificationReader(pre, on_error="skip")
    reader.read(jsonl)
    assert reader.report.examples == 2 and reader.report.skipped_by_kind == {"invalid_utf8": 1}
    # A CSV record may span lines, so a bad line cannot be dropped alone: always an error.
    table = tmp_path / "latin1.csv"
    table.write_bytes(b'text,label\n"caf\xe9",b\n')
    with pytest.raises(MalformedRowError, match=r"latin1.csv:2: not valid UTF-8") as info:
        ClassificationReader(pre, on_error="skip").read(table)
    assert (info.value.kind, info.value.skippable) == ("invalid_utf8", False)


def test_epochs_are_permutations_ordered_by_seed_and_epoch_alone(pre):
    """read(epochs=N): N passes in one dataset, each a permutation of the file that a dataset
    built afresh repeats exactly (what resuming across an epoch boundary needs), and no
    batch straddling two passes."""

    def reader(seed):
        return ClassificationReader(
            pre, header=False, column_names=("label", "text"), batch_size=300, shuffle=True, seed=seed
        )

    def batches(dataset):
        return [x["token_ids"].numpy() for x, _ in dataset]

    one_pass = _all(reader(3).read(MR))[0]["token_ids"]  # [4000, S]
    first, again = batches(reader(3).read(MR, epochs=3)), batches(reader(3).read(MR, epochs=3))
    per_pass = 14  # 13 x 300 + 100
    assert [len(b) for b in first] == ([300] * 13 + [100]) * 3
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    passes = [np.concatenate(first[i * per_pass : (i + 1) * per_pass]) for i in range(3)]

    def rows(array):
        return sorted(map(bytes, array))

    assert all(rows(p) == rows(one_pass) for p in passes)
    assert not np.array_equal(passes[0], passes[1]) and not np.array_equal(passes[1], passes[2])
    assert not np.array_equal(np.concatenate(batches(reader(4).read(MR, epochs=1))), passes[0])
    with pytest.raises(ValueError, match="epochs"):
        reader(3).read(MR, epochs=0)


def test_length_buckets_cut_each_batch_and_keep_every_row_once_per_pass(pre):
    """length_buckets: each pass still holds every MR row exactly once, in as many batches as
    fixed-length batching (ceil(4000 / 32) = 125), each batch cut to its longest row rounded
    up to 8 with nothing real cut off; batches are made of similar lengths (far less padding
    than random batches), come in an order that mixes lengths, and are the same in a dataset
    built afresh for the same seed and pass; unshuffled (validation) reading keeps file order."""

    def reader(seed, buckets, shuffle=True):
        return ClassificationReader(
            pre,
            header=False,
            column_names=("label", "text"),
            batch_size=32,
            shuffle=shuffle,
            seed=seed,
            length_buckets=buckets,
        )

    full, full_y = _all(reader(3, False, shuffle=False).read(MR))  # [4000, S], file order
    lengths = full["padding_mask"].sum(axis=1)
    key = {
        bytes(row[:n]): n for row, n in zip(full["token_ids"], lengths)
    }  # a row's real tokens -> its length

    def passes(dataset):
        return [(x, y) for x, y in dataset]

    first = passes(reader(3, True).read(MR, epochs=2))
    assert len(first) == 2 * 125
    widths = []
    for number in range(2):
        seen = []
        for x, y in first[number * 125 : (number + 1) * 125]:
            ids, mask = x["token_ids"].numpy(), x["padding_mask"].numpy()
            longest = mask.sum(axis=1).max()
            assert ids.shape[1] == min(LENGTH, -(-longest // 8) * 8), (ids.shape, longest)
            assert set(x) == {"token_ids", "segment_ids", "padding_mask"} and y.shape == (len(ids),)
            seen += [bytes(row[:n]) for row, n in zip(ids, mask.sum(axis=1))]
            widths.append(ids.shape[1])
        assert sorted(seen) == sorted(key), "a pass must hold every row once"
    # Similar lengths together: padding per row far below random batches' (about 9 here).
    padded = sum(w * 32 for w in widths[:124]) / (124 * 32) - lengths.mean()
    assert padded < 4, padded
    # Lengths mixed over the pass: the widths are not sorted.
    assert widths[:125] != sorted(widths[:125]) and widths[:125] != sorted(widths[:125], reverse=True)
    again = passes(reader(3, True).read(MR, epochs=2))
    for (a, _), (b, _) in zip(first, again):
        np.testing.assert_array_equal(a["token_ids"], b["token_ids"])
    other = passes(reader(4, True).read(MR, epochs=1))
    assert not all(np.array_equal(a["token_ids"], b["token_ids"]) for (a, _), (b, _) in zip(first, other))
    # Not shuffled: file order, each batch cut, the same rows and labels as the full width.
    cut, cut_y = zip(*[(x, y) for x, y in reader(3, True, shuffle=False).read(MR)])
    np.testing.assert_array_equal(np.concatenate([y.numpy() for y in cut_y]), full_y)
    start = 0
    for x in cut:
        width = x["token_ids"].shape[1]
        np.testing.assert_array_equal(
            x["token_ids"].numpy(), full["token_ids"][start : start + len(x["token_ids"]), :width]
        )
        assert full["padding_mask"][start : start + len(x["token_ids"]), width:].sum() == 0
        start += len(x["token_ids"])
    with pytest.raises(
        ValueError, match=r"Shuffled length buckets need an int epochs and a seed.*epochs=None"
    ):
        reader(3, True).read(MR)
    with pytest.raises(
        ValueError, match=r"length_buckets must be True or False. Received: length_buckets='yes'"
    ):
        reader(3, "yes")


@pytest.mark.slow  # about 20 s or more: MiniLM over bucketed batches
def test_length_buckets_give_the_full_width_outputs(pre):
    """A classifier on a batch cut to its longest row gives the outputs of the batch padded
    to the whole sequence length (what the cut relies on), pairs included."""
    import keras_bert_impl as kb

    pre = BertPreprocessor(pre.vocabulary, sequence_length=64)  # MR batches' longest rows are shorter
    backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=len(pre.vocabulary))
    model = kb.BertClassifier(backbone, num_classes=2)
    settings = ({"header": False, "column_names": ("label", "text"), "batch_size": 16}, MR, 3)
    pairs = ({"text_b_column": "text_b", "batch_size": 2}, fixture("nli_pairs.tsv"), 2)
    for kwargs, path, batches in (settings, pairs):
        full = ClassificationReader(pre, **kwargs).read(path).take(batches)
        cut = ClassificationReader(pre, length_buckets=True, **kwargs).read(path).take(batches)
        for (a, _), (b, _) in zip(full, cut):
            assert b["token_ids"].shape[1] < a["token_ids"].shape[1]
            np.testing.assert_allclose(model(b)["logits"], model(a)["logits"], atol=1e-5)
