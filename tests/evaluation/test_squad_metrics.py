"""squad_metrics checked against the official SQuAD v1.1 script (tf-models-official's copy,
official/nlp/tools/squad_evaluate_v1_1.py). That copy returns fractions; the original
script, and squad_metrics, report percent."""

import json
import logging

import numpy as np
import pytest
from official.nlp.tools import squad_evaluate_v1_1 as official

from keras_bert_impl.evaluation import normalize_answer, squad_metrics

# Hand-written gold answers and predictions that exercise the normalization.
CASES = [
    ("q1", ["Denver Broncos"], "denver broncos"),  # case
    ("q2", ["the Eiffel Tower"], "Eiffel  Tower."),  # article, whitespace, punctuation
    ("q3", ["Saint Bernadette Soubirous", "Bernadette"], "Bernadette Soubirous"),  # best of several answers
    ("q4", ["1,291"], "1291"),  # punctuation inside a token
    ("q5", ["Zürich"], "Zurich"),  # no accent folding: a miss
    ("q6", ["The"], "the"),  # normalises to "" on both sides: EM 1, F1 0
    ("q7", ["an apple a day"], "apple day"),
    ("q8", ["Lake Baikal"], ""),  # empty prediction
    ("q9", ["theory of relativity"], "The theory"),  # "theory" kept (word boundary), "The" dropped
    ("q10", ["New York City", "NYC"], "New York"),
    ("q11", ["red red wine"], "red wine wine"),  # tokens counted as a bag
    ("q12", ["–40 °C"], "−40 °C"),  # only ASCII punctuation is removed
    ("q13", ["Anne"], "Ann"),
    ("q14", ["a"], "A!"),
]


def _official(predictions, gold):
    qas = [{"id": qid, "answers": [{"text": a} for a in answers]} for qid, answers in gold.items()]
    dataset = [{"paragraphs": [{"qas": qas}]}]
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # it logs every unanswered question
    try:
        result = official.evaluate(dataset, predictions)
    finally:
        logger.setLevel(level)
    return 100 * result["exact_match"], 100 * result["final_f1"]


def test_normalization_equals_official():
    for _, answers, prediction in CASES:
        for text in answers + [prediction]:
            assert normalize_answer(text) == official._normalize_answer(text)
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"


def test_hand_written_cases_equal_official():
    gold = {qid: answers for qid, answers, _ in CASES}
    predictions = {qid: prediction for qid, _, prediction in CASES}
    result = squad_metrics(predictions, gold)
    assert (result["exact_match"], result["f1"]) == pytest.approx(_official(predictions, gold), abs=1e-9)
    assert result["num_questions"] == len(CASES) and result["num_unanswered"] == 0
    # Per question too, so no error hides in the average.
    for qid, answers, prediction in CASES:
        ours = squad_metrics({qid: prediction}, {qid: answers})
        assert (ours["exact_match"], ours["f1"]) == pytest.approx(
            _official({qid: prediction}, {qid: answers}), abs=1e-9
        ), qid
    assert squad_metrics({"q6": "the"}, {"q6": ["The"]}) == {
        "exact_match": 100.0,
        "f1": 0.0,
        "num_questions": 1,
        "num_unanswered": 0,
    }


@pytest.mark.parametrize("seed", range(5))
def test_random_answers_equal_official(seed):
    rng = np.random.default_rng(seed)
    words = [
        "the",
        "a",
        "an",
        "Lake",
        "lake",
        "Baikal",
        "1,291",
        "Zürich",
        "(river)",
        "city's",
        "north",
        "-",
        "The",
        "AN",
        "deep.",
    ]
    gold, predictions = {}, {}
    for i in range(200):
        answers = [" ".join(rng.choice(words, rng.integers(1, 5))) for _ in range(rng.integers(1, 4))]
        gold[f"q{i}"] = answers
        if rng.random() < 0.9:  # the rest are unanswered
            base = answers[0].split() if rng.random() < 0.5 else list(rng.choice(words, rng.integers(0, 5)))
            keep = [w for w in base if rng.random() < 0.8] + list(rng.choice(words, rng.integers(0, 2)))
            predictions[f"q{i}"] = ("  " if rng.random() < 0.2 else " ").join(keep)
    result = squad_metrics(predictions, gold)
    assert (result["exact_match"], result["f1"]) == pytest.approx(_official(predictions, gold), abs=1e-9)
    assert result["num_unanswered"] == 200 - len(predictions) > 0
    assert json.loads(json.dumps(result)) == result


def test_unanswered_questions_score_zero():
    result = squad_metrics({"a": "Denver"}, {"a": ["Denver"], "b": ["Paris"]})
    assert result == {"exact_match": 50.0, "f1": 50.0, "num_questions": 2, "num_unanswered": 1}
    assert _official({"a": "Denver"}, {"a": ["Denver"], "b": ["Paris"]}) == (50.0, 50.0)


def test_a_single_gold_string_is_one_answer():
    assert squad_metrics({"a": "Paris"}, {"a": "paris"})["exact_match"] == 100.0


@pytest.mark.parametrize(
    "predictions, gold, message",
    [
        ({"x": "Paris"}, {"a": ["Paris"]}, r"1 predicted question ids are not in gold, e.g. \['x'\]"),
        ({1: "Paris"}, {"1": ["Paris"]}, "int vs str"),
        ({"a": None}, {"a": ["Paris"]}, "answer strings. Received: 'a': None"),
        ({"a": "Paris"}, {"a": []}, r"gold\['a'\] must be a non-empty list.*v2.0"),
        ({"a": "Paris"}, {"a": [1]}, "non-empty list of answer strings"),
        ({"a": "Paris"}, {}, "at least one question"),
        ([("a", "Paris")], {"a": ["Paris"]}, "dicts keyed by question id"),
    ],
)
def test_bad_inputs(predictions, gold, message):
    with pytest.raises(ValueError, match=message):
        squad_metrics(predictions, gold)
