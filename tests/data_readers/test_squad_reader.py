"""SquadReader on hand-written SQuAD v1.1/v2.0 fixtures, checked row for row against Google's run_squad.py.

The fixtures (tests/fixtures/readers/squad_*.json) are written by hand in the
SQuAD layout (no SQuAD download exists here): encyclopedia-style paragraphs
on Zürich, Lake Baikal, penicillin and the Trans-Siberian Railway, with
accents, a Unicode minus and degree sign, an en dash, a question with three
answers (dev-set style), contexts of 149-322 wordpieces that need several
windows at sequence length 96, and v2.0 unanswerable questions.
"""

import json
import logging
import os
import re
import unicodedata

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl.data.readers import MalformedRowError, SquadReader
from keras_bert_impl.tokenization import BertPreprocessor
from tests.data_readers.google_reference import google_squad_features
from tests.harness import tiny_backbone_config

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "readers")
V1 = os.path.join(FIXTURES, "squad_v1.1_sample.json")
V2 = os.path.join(FIXTURES, "squad_v2.0_sample.json")
LENGTH, STRIDE, QUERY = 96, 32, 24


@pytest.fixture(scope="module")
def vocab_path():
    path = os.path.join(os.path.dirname(FIXTURES), "..", "..", "data", "minilm", "vocab.txt")
    if not os.path.exists(path):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    return os.path.abspath(path)


@pytest.fixture(scope="module")
def pre(vocab_path):
    return BertPreprocessor(vocab_path, sequence_length=LENGTH)


def _rows(dataset):
    x, y = next(iter(dataset.unbatch().batch(10_000)))
    return {k: v.numpy() for k, v in x.items()}, {k: v.numpy() for k, v in y.items()}


def _normal(text):
    text = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("path, v2", [(V1, False), (V2, True)])
def test_rows_equal_google_run_squad(pre, vocab_path, tmp_path, path, v2):
    reader = SquadReader(pre, doc_stride=STRIDE, max_query_length=QUERY)
    x, y = _rows(reader.read(path))
    # Google's training reader insists on one answer per question.
    data = json.load(open(path, encoding="utf-8"))
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    single = tmp_path / "single.json"
    single.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    _, google = google_squad_features(str(single), vocab_path, True, LENGTH, STRIDE, QUERY, v2)
    assert len(google) == len(reader.features) == len(x["token_ids"]) > 50
    np.testing.assert_array_equal(x["token_ids"], [g.input_ids for g in google])
    np.testing.assert_array_equal(x["segment_ids"], [g.segment_ids for g in google])
    np.testing.assert_array_equal(x["padding_mask"], [g.input_mask for g in google])
    np.testing.assert_array_equal(y["start_logits"], [g.start_position for g in google])
    np.testing.assert_array_equal(y["end_logits"], [g.end_position for g in google])
    for ours, theirs in zip(reader.features, google):
        assert ours.window_index == theirs.doc_span_index
        assert [ours.is_max_context(i) for i in range(LENGTH)] == [
            theirs.token_is_max_context.get(i, False) for i in range(LENGTH)
        ]


@pytest.mark.parametrize("path", [V1, V2])
def test_labelled_spans_decode_to_the_answer(pre, path):
    reader = SquadReader(pre, doc_stride=STRIDE, max_query_length=QUERY)
    x, y = _rows(reader.read(path))
    answered = set()
    for i, feature in enumerate(reader.features):
        start, end = y["start_logits"][i], y["end_logits"][i]
        assert (start, end) == (feature.start_position, feature.end_position)
        if start == 0:
            assert end == 0
            continue
        answer = feature.answers[0]
        # The wordpieces, glued back by the tokenizer, are the answer up to case, accents and spaces ...
        decoded = pre.detokenize(x["token_ids"][i : i + 1, start : end + 1]).numpy()[0].decode()
        assert _normal(decoded) == _normal(answer), (feature.example_id, decoded, answer)
        # ... and their character spans cut exactly the answer out of the original context.
        assert feature.answer_text(start, end) == answer
        assert x["segment_ids"][i, start] == 1 and x["padding_mask"][i, end] == 1
        answered.add(feature.example_id)
    expected = {f.example_id for f in reader.features if not f.is_impossible}
    assert answered == expected


def test_long_context_windows_and_v2_impossible(pre):
    reader = SquadReader(pre, doc_stride=STRIDE, max_query_length=QUERY)
    reader.read(V1)
    windows = [f for f in reader.features if f.example_id == "bk-005"]  # "nerpa", late in a 322-piece context
    assert len(windows) == 9 and reader.report.counters["windows"] == 73 and reader.report.examples == 11
    assert [w.window_index for w in windows] == list(range(9))
    labelled = [w.window_index for w in windows if w.start_position > 0]
    assert labelled == [6, 7, 8]  # earlier windows do not reach the answer: 0/0, i.e. [CLS]
    # Windows overlap by sequence room - stride; each context piece is "max context" in exactly one window.
    spans = np.concatenate([w.char_spans[w.token_is_max_context] for w in windows])
    assert (
        len(spans)
        == len({tuple(s) for s in spans})
        == len(pre.tokenize(tf.constant([windows[0].context]))[0])
    )

    reader = SquadReader(pre, doc_stride=STRIDE, max_query_length=QUERY)
    reader.read(V2)
    impossible = [f for f in reader.features if f.is_impossible]
    assert {f.example_id for f in impossible} == {"pn-004", "pn-005", "ts-005"}
    assert (
        len([f for f in impossible if f.example_id == "ts-005"]) > 1
    )  # a long context: several windows, all 0/0
    assert all(f.start_position == 0 and f.end_position == 0 and f.answers == [] for f in impossible)
    # The dev-style question with three answers is labelled with the first and keeps all three.
    reader.read(V1)
    multi = [f for f in reader.features if f.example_id == "zh-004"]
    assert multi[0].answers == ["the Spanish-Brötli-Bahn", "Spanish-Brötli-Bahn", "Spanish-Brötli-Bahn"]


def test_offsets_survive_normalisation(pre, tmp_path):
    """Lower-casing, accent stripping, a dropped control character and an
    [UNK] change lengths; answers still map to their own characters."""
    context = (
        "Beyoncé’s naïve CAFÉ… opened in Zürich\x07town in 1999; its owner, Ǆemal 🙂Ünal, cooks ﬁne crêpes."
    )
    answers = ["CAFÉ", "Zürich\x07town", "1999", "ﬁne crêpes", "crêpes", "Ǆemal"]
    qas = [
        {
            "id": f"n-{i}",
            "question": f"Which thing number {i}?",
            "answers": [{"text": a, "answer_start": context.index(a)}],
        }
        for i, a in enumerate(answers)
    ]
    path = tmp_path / "norm.json"
    path.write_text(
        json.dumps(
            {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}
        ),
        encoding="utf-8",
    )
    reader = SquadReader(pre, doc_stride=STRIDE, max_query_length=QUERY)
    x, y = _rows(reader.read(str(path)))
    ids = pre.tokenize(tf.constant([context]))[0].numpy()
    for i, (feature, answer) in enumerate(zip(reader.features, answers)):
        start, end = feature.start_position, feature.end_position
        assert start > 0
        # The row holds the preprocessor's own ids for the context.
        offset = int(np.argmax(x["segment_ids"][i]))
        np.testing.assert_array_equal(x["token_ids"][i, offset : offset + len(ids)], ids)
        if answer == "ﬁne crêpes":  # "ﬁne" is one [UNK] (no "ﬁ" in the vocab): its piece spans the word
            assert feature.answer_text(start, end) == answer
            continue
        assert feature.answer_text(start, end) == answer
    assert reader.report.counters["pieces_spanning_word"] >= 1


def test_bad_answer_raises_with_file_line_and_reason(pre):
    path = os.path.join(FIXTURES, "squad_bad_answer.json")
    with pytest.raises(MalformedRowError) as info:
        SquadReader(pre).read(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.path, err.line, err.kind) == (path, 21, "answer_not_in_context")
    assert (
        "answer 'Rashid' is not in its context at answer_start=151" in err.reason
        and "occurs at 163" in err.reason
    )
    assert "rs-002" in str(err) and f"{path}:21" in str(err)


def test_bad_answer_skipped_and_counted(pre, caplog):
    reader = SquadReader(pre, on_error="skip")
    with caplog.at_level(logging.WARNING, logger="keras_bert_impl.data.readers"):
        dataset = reader.read(os.path.join(FIXTURES, "squad_bad_answer.json"))
    assert reader.report.skipped == 1 and reader.report.skipped_by_kind == {"answer_not_in_context": 1}
    assert reader.report.examples == 2 and [f.example_id for f in reader.features] == ["rs-001", "rs-003"]
    assert reader.report.errors[0].line == 21
    assert "skipped 1 malformed rows (answer_not_in_context: 1)" in caplog.text
    assert sum(int(b[1]["start_logits"].shape[0]) for b in dataset) == 2


def test_invalid_json_always_raises(pre):
    path = os.path.join(FIXTURES, "squad_truncated.json")
    for on_error in ("raise", "skip"):
        with pytest.raises(MalformedRowError, match="invalid JSON") as info:
            SquadReader(pre, on_error=on_error).read(path)
        assert (info.value.line, info.value.kind, info.value.skippable) == (8, "bad_json", False)


def test_arguments_are_checked(vocab_path, pre):
    with pytest.raises(ValueError, match="sequence_length=None"):
        SquadReader(BertPreprocessor(vocab_path, sequence_length=None))
    with pytest.raises(ValueError, match="doc_stride=0"):
        SquadReader(pre, doc_stride=0)
    with pytest.raises(ValueError, match="sequence_length=96, max_query_length=93"):
        SquadReader(pre, max_query_length=93)
    with pytest.raises(ValueError, match="on_error='ignore'"):
        SquadReader(pre, on_error="ignore")
    with pytest.raises(FileNotFoundError, match="missing.json"):
        SquadReader(pre).read("missing.json")


def test_fits_a_span_labeler(pre):
    dataset = SquadReader(
        pre, doc_stride=STRIDE, max_query_length=QUERY, batch_size=8, shuffle=True, seed=1
    ).read(V2)
    backbone = kb.BertBackbone(
        **tiny_backbone_config(vocabulary_size=len(pre.vocabulary), max_sequence_length=LENGTH, num_layers=1)
    )
    model = kb.BertSpanLabeler(backbone)
    history = model.fit(dataset.take(2), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    keras.backend.clear_session()
