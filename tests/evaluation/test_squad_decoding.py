"""decode_squad_predictions / best_squad_spans on SquadFeatures written by hand here (no tokenizer:
the "wordpieces" are the words and punctuation of a sentence, their character spans and max-context
flags worked out by hand), then on SquadReader windows of the hand-written fixture
tests/fixtures/readers/squad_v1.1_sample.json, checked against Google's run_squad.py write_predictions.

Shape legend: N features, S sequence length.
"""

import collections
import json
import math
import os
import re
import types

import numpy as np
import pytest
import six

from keras_bert_impl.data.readers.squad_feature import SquadFeature
from keras_bert_impl.evaluation import (
    best_squad_spans,
    decode_squad_predictions,
    squad_gold_answers,
    squad_metrics,
)

CONTEXT = "Zwingli preached in Zürich from 1519 until his death in 1531."
# Pieces: Zwingli preached in Zürich from 1519 until his death in 1531 .
#   index:  0       1        2  3      4    5    6     7   8     9  10   11
SPANS = np.array([m.span() for m in re.finditer(r"\w+|[^\w\s]", CONTEXT)], np.int32)  # [12, 2]
OFFSET = 7  # [CLS] when did zwingli die ? [SEP]: the context starts at row position 7
LENGTH = 24  # 7 + up to 12 pieces + [SEP] + padding


def _feature(qid, answers, first, last, max_context, window_index=0):
    """The window of pieces first..last (inclusive)."""
    assert len(max_context) == last - first + 1
    return SquadFeature(
        example_id=qid,
        window_index=window_index,
        question="?",
        context=CONTEXT,
        answers=answers,
        is_impossible=False,
        start_position=0,
        end_position=0,
        context_offset=OFFSET,
        char_spans=SPANS[first : last + 1],
        token_is_max_context=np.array(max_context, bool),
    )


def _one_window(qid, answers):
    return _feature(qid, answers, 0, 11, [True] * 12)


def _two_windows(qid, answers):
    # Windows of 7 pieces, stride 5: pieces 0-6 and 5-11. Google's max-context score
    # min(left, right) + 0.01 * length gives piece 5 to window 0 (1.07 vs 0.07) and
    # piece 6 to window 1 (0.07 vs 1.07).
    return [
        _feature(qid, answers, 0, 6, [True] * 6 + [False], window_index=0),
        _feature(qid, answers, 5, 11, [False] + [True] * 6, window_index=1),
    ]


def _logits(features, peaks, base=-10.0):
    """start/end logits [N, S]: `base` everywhere but `peaks` {(row, "start"|"end", position): value}."""
    start, end = (
        np.full([len(features), LENGTH], base, np.float32),
        np.full([len(features), LENGTH], base, np.float32),
    )
    for (row, which, position), value in peaks.items():
        (start if which == "start" else end)[row, position] = value
    return start, end


def _perfect(features, piece_spans):
    """One-hot logits at each feature's answer pieces, or at [CLS] when the window does not hold them."""
    peaks = {}
    for row, feature in enumerate(features):
        first, last = piece_spans[feature.example_id]
        window_first = int(np.nonzero(SPANS[:, 0] == feature.char_spans[0][0])[0][0])
        inside = window_first <= first and last < window_first + len(feature.char_spans)
        peaks[row, "start", OFFSET + first - window_first if inside else 0] = 10.0
        peaks[row, "end", OFFSET + last - window_first if inside else 0] = 10.0
    return _logits(features, peaks)


QUESTIONS = {  # qid: (answers, first piece, last piece)
    "died": (["1531", "in 1531"], 10, 10),
    "where": (["Zürich"], 3, 3),
    "who": (["Zwingli"], 0, 0),
    "in-overlap-5": (["1519"], 5, 5),
    "in-overlap-6": (["until"], 6, 6),
    "ends-in-punctuation": (["1531."], 10, 11),
}
# Answers that two windows of 7 pieces cannot give back (one window only): pieces 4-7 are in
# neither window whole; pieces 5-8 are whole only in window 1, which does not give piece 5 its
# max context, so Google's rule never takes a span starting there from it.
ONE_WINDOW_ONLY = {"span": (["1519 until his death"], 5, 8), "across": (["from 1519 until his"], 4, 7)}


def test_perfect_logits_one_window_give_the_gold_answers():
    questions = {**QUESTIONS, **ONE_WINDOW_ONLY}
    features = [_one_window(qid, answers) for qid, (answers, _, _) in questions.items()]
    start, end = _perfect(features, {qid: (a, b) for qid, (_, a, b) in questions.items()})
    predictions = decode_squad_predictions(features, start, end)
    assert predictions == {qid: answers[0] for qid, (answers, _, _) in questions.items()}
    gold = squad_gold_answers(features)
    assert gold == {qid: answers for qid, (answers, _, _) in questions.items()}
    assert squad_metrics(predictions, gold) == {
        "exact_match": 100.0,
        "f1": 100.0,
        "num_questions": 8,
        "num_unanswered": 0,
    }


def test_perfect_logits_two_windows_give_the_gold_answers_from_the_max_context_window():
    features = [f for qid, (answers, _, _) in QUESTIONS.items() for f in _two_windows(qid, answers)]
    start, end = _perfect(features, {qid: (a, b) for qid, (_, a, b) in QUESTIONS.items()})
    spans = best_squad_spans(features, start, end)
    assert {qid: span["text"] for qid, span in spans.items()} == {
        qid: a[0] for qid, (a, _, _) in QUESTIONS.items()
    }
    window = {qid: features[span["feature_index"]].window_index for qid, span in spans.items()}
    # Only in window 0 / only in window 1 / in both, taken where the start piece is best seen.
    assert window["who"] == window["where"] == 0 and window["died"] == window["ends-in-punctuation"] == 1
    assert window["in-overlap-5"] == 0 and window["in-overlap-6"] == 1
    predictions = decode_squad_predictions(features, start, end)
    assert squad_metrics(predictions, squad_gold_answers(features)) == {
        "exact_match": 100.0,
        "f1": 100.0,
        "num_questions": 6,
        "num_unanswered": 0,
    }


def test_start_must_be_max_context_in_its_window():
    features = _two_windows("q", ["1519"])
    # Piece 5 ("1519") is at row position 7 + 5 = 12 in window 0 and 7 + 0 = 7 in window 1, where it
    # scores far higher; but only window 0 gives it max context.
    start, end = _logits(
        features, {(0, "start", 12): 3.0, (0, "end", 12): 3.0, (1, "start", 7): 9.0, (1, "end", 7): 9.0}
    )
    span = best_squad_spans(features, start, end)["q"]
    assert (span["text"], span["feature_index"], span["start"], span["score"]) == ("1519", 0, 12, 6.0)
    # A different valid span in window 1 that scores higher than window 0's wins.
    start[1, 7 + 3], end[1, 7 + 3] = 4.0, 4.0  # "death", piece 8, max context in window 1
    assert decode_squad_predictions(features, start, end) == {"q": "death"}


def test_end_before_start_is_skipped():
    features = [_one_window("q", ["x"])]
    start, end = _logits(
        features, {(0, "start", OFFSET + 8): 5.0, (0, "end", OFFSET + 3): 9.0, (0, "end", OFFSET + 9): 1.0}
    )
    assert decode_squad_predictions(features, start, end) == {"q": "death in"}


def test_max_answer_length_in_pieces():
    features = [_one_window("q", ["x"])]
    peaks = {
        (0, "start", OFFSET + 0): 5.0,
        (0, "start", OFFSET + 8): 4.0,
        (0, "end", OFFSET + 10): 5.0,
        (0, "end", OFFSET + 9): 1.0,
    }
    start, end = _logits(features, peaks)
    decoded = {
        n: decode_squad_predictions(features, start, end, max_answer_length=n)["q"]
        for n in (30, 11, 10, 3, 2, 1)
    }
    assert decoded == {
        30: "Zwingli preached in Zürich from 1519 until his death in 1531",  # pieces 0-10: 5 + 5
        11: "Zwingli preached in Zürich from 1519 until his death in 1531",
        10: "death in 1531",  # 4 + 5 beats pieces 0-9 (5 + 1)
        3: "death in 1531",
        2: "death in",  # 4 + 1
        1: "Zwingli",  # pieces 0-0 (5 - 10) and 10-10 (-10 + 5) tie: the better-ranked start wins
    }


def test_question_special_and_padding_positions_are_never_answers():
    features = [_one_window("q", ["x"])]
    peaks = {
        (0, w, p): 50.0 for w in ("start", "end") for p in list(range(OFFSET)) + [OFFSET + 12, LENGTH - 1]
    }
    peaks.update({(0, "start", OFFSET + 3): 1.0, (0, "end", OFFSET + 3): 1.0})
    start, end = _logits(features, peaks)
    assert decode_squad_predictions(features, start, end) == {"q": "Zürich"}


def test_no_valid_span_among_the_top_candidates():
    features = [_one_window("q", ["x"])]
    start, end = _logits(features, {(0, "start", 0): 9.0, (0, "end", 0): 9.0})
    # The top starts are [CLS] and then, all tied, positions 1, 2, ...: the first context piece is position 7.
    assert best_squad_spans(features, start, end, n_best=7) == {"q": None}
    assert decode_squad_predictions(features, start, end, n_best=7) == {"q": ""}
    assert decode_squad_predictions(features, start, end, n_best=8) == {"q": "Zwingli"}


def test_equal_logits_take_the_earliest_candidate():
    features = _two_windows("q", ["x"])
    start, end = _logits(features, {}, base=0.0)
    span = best_squad_spans(features, start, end)["q"]
    assert (span["feature_index"], span["start"], span["end"], span["text"]) == (0, OFFSET, OFFSET, "Zwingli")


def test_question_windows_need_not_be_adjacent_and_results_are_json():
    a, b = _two_windows("a", ["Zürich"]), _two_windows("b", ["1531"])
    features = [a[0], b[0], a[1], b[1]]
    start, end = _logits(
        features,
        {
            (0, "start", OFFSET + 3): 5.0,
            (0, "end", OFFSET + 3): 5.0,
            (3, "start", OFFSET + 5): 5.0,
            (3, "end", OFFSET + 5): 5.0,
        },
    )
    spans = best_squad_spans(features, start, end)
    assert list(spans) == ["a", "b"] and spans["b"]["feature_index"] == 3
    assert decode_squad_predictions(features, start, end) == {"a": "Zürich", "b": "1531"}
    assert json.loads(json.dumps(spans)) == spans


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(start_logits=np.zeros([1, LENGTH]), end_logits=np.zeros([1, LENGTH])),
            r"one row of logits per feature. Received: 2 features and 1 rows",
        ),
        (
            dict(end_logits=np.zeros([2, LENGTH + 1])),
            r"same shape \[N, S\]. Received: \(2, 24\) and \(2, 25\)",
        ),
        (dict(start_logits=np.zeros([2])), "2-D array"),
        (dict(start_logits=np.full([2, LENGTH], np.nan)), "finite"),
        (dict(max_answer_length=0), "max_answer_length=0"),
        (dict(n_best=2.5), "n_best=2.5"),
        (dict(features=[{"example_id": "q"}] * 2), r"features\[0\] is not a SquadFeature"),
        (dict(features="features.json"), "list of SquadFeature"),
    ],
)
def test_bad_inputs(change, message):
    args = dict(
        features=_two_windows("q", ["x"]),
        start_logits=np.zeros([2, LENGTH]),
        end_logits=np.zeros([2, LENGTH]),
    )
    args.update(change)
    with pytest.raises(ValueError, match=message):
        decode_squad_predictions(**args)


# -- SquadReader windows against Google's run_squad.py ---------------------------------

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V1 = os.path.join(TESTS, "fixtures", "readers", "squad_v1.1_sample.json")
VOCAB = os.path.join(os.path.dirname(TESTS), "data", "minilm", "vocab.txt")
READER_LENGTH, STRIDE, QUERY = 96, 32, 24


@pytest.fixture(scope="module")
def windows():
    if not os.path.exists(VOCAB):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    from keras_bert_impl.data.readers import SquadReader
    from keras_bert_impl.tokenization import BertPreprocessor

    reader = SquadReader(
        BertPreprocessor(VOCAB, sequence_length=READER_LENGTH), doc_stride=STRIDE, max_query_length=QUERY
    )
    reader.read(V1)
    return reader.features


def test_perfect_logits_on_reader_windows_score_100(windows):
    start = np.zeros([len(windows), READER_LENGTH], np.float32)
    end = np.zeros_like(start)
    rows = np.arange(len(windows))
    # The reader's labels: the answer's pieces, or [CLS] in windows that do not hold it.
    start[rows, [f.start_position for f in windows]] = 10.0
    end[rows, [f.end_position for f in windows]] = 10.0
    predictions = decode_squad_predictions(windows, start, end)
    gold = squad_gold_answers(windows)
    assert predictions == {qid: answers[0] for qid, answers in gold.items()}
    assert squad_metrics(predictions, gold) == {
        "exact_match": 100.0,
        "f1": 100.0,
        "num_questions": len(gold),
        "num_unanswered": 0,
    }
    per_question = collections.Counter(f.example_id for f in windows)
    assert len(gold) >= 10 and max(per_question.values()) >= 5  # several windows per question


def _google_write_predictions():
    """Google's write_predictions and the features it reads (is_training=False), from
    bert-tensorflow's run_squad.py."""
    import tensorflow as tf

    from tests.data_readers.google_reference import _definitions, google_tokenization

    names = (
        "SquadExample",
        "InputFeatures",
        "read_squad_examples",
        "convert_examples_to_features",
        "_improve_answer_span",
        "_check_is_max_context",
        "write_predictions",
        "get_final_text",
        "_get_best_indexes",
        "_compute_softmax",
    )
    src, module = _definitions("run_squad.py", names)
    flags = types.SimpleNamespace(
        version_2_with_negative=False, verbose_logging=False, null_score_diff_threshold=0.0
    )
    ns = {
        "collections": collections,
        "json": json,
        "math": math,
        "six": six,
        "tf": tf.compat.v1,
        "tokenization": google_tokenization(),
        "FLAGS": flags,
        "__name__": "google_run_squad",
    }
    exec(compile(module, src, "exec"), ns)  # noqa: S102
    tokenizer = ns["tokenization"].FullTokenizer(vocab_file=VOCAB, do_lower_case=True)
    examples = ns["read_squad_examples"](V1, is_training=False)
    features = []
    verbosity = tf.compat.v1.logging.get_verbosity()
    tf.compat.v1.logging.set_verbosity(
        tf.compat.v1.logging.ERROR
    )  # it logs its first 20 examples and every write
    try:
        ns["convert_examples_to_features"](
            examples, tokenizer, READER_LENGTH, STRIDE, QUERY, False, features.append
        )
    finally:
        tf.compat.v1.logging.set_verbosity(verbosity)
    return ns["write_predictions"], examples, features


def test_decoding_equals_google_write_predictions(windows, tmp_path):
    import tensorflow as tf

    write_predictions, examples, google_features = _google_write_predictions()
    assert len(google_features) == len(windows)
    raw_result = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
    rng = np.random.default_rng(0)
    verbosity = tf.compat.v1.logging.get_verbosity()
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    checked = empty = 0
    try:
        # Random logits; small integers, so that many candidates tie; tight n_best / length limits.
        settings = [("normal", 20, 30)] * 4 + [
            ("ties", 20, 30),
            ("normal", 3, 5),
            ("ties", 2, 3),
            ("ties", 20, 1),
        ]
        for kind, n_best, max_length in settings:
            shape = (len(windows), READER_LENGTH)
            if kind == "normal":
                start, end = (
                    rng.normal(size=shape).astype(np.float32),
                    rng.normal(size=shape).astype(np.float32),
                )
            else:
                start, end = (rng.integers(-2, 3, shape).astype(np.float32) for _ in range(2))
            results = [
                raw_result(g.unique_id, start[i].tolist(), end[i].tolist())
                for i, g in enumerate(google_features)
            ]
            write_predictions(
                examples,
                google_features,
                results,
                n_best,
                max_length,
                True,
                str(tmp_path / "p.json"),
                str(tmp_path / "n.json"),
                str(tmp_path / "o.json"),
            )
            google = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
            google_nbest = json.loads((tmp_path / "n.json").read_text(encoding="utf-8"))
            ours = best_squad_spans(windows, start, end, max_answer_length=max_length, n_best=n_best)
            assert list(ours) == list(google)
            for qid, span in ours.items():
                if span is None:
                    assert google[qid] == "empty"  # Google's placeholder when nothing is valid; we give ""
                    empty += 1
                    continue
                top = google_nbest[qid][0]
                assert (span["start_logit"], span["end_logit"]) == (top["start_logit"], top["end_logit"]), qid
                assert span["text"] == google[qid], qid
                checked += 1
            assert decode_squad_predictions(windows, start, end, max_length, n_best) == {
                qid: "" if text == "empty" else text for qid, text in google.items()
            }
    finally:
        tf.compat.v1.logging.set_verbosity(verbosity)
    assert checked > 60 and empty > 10
