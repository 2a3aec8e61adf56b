"""SQuAD v1.1 exact match and F1, as the official evaluation script computes them."""

import collections
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text):
    """The official SQuAD answer normalization: lower-case, drop ASCII punctuation, the articles
    a/an/the, extra whitespace.

    Example:
    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _f1(prediction, answer):
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(answer).split()
    same = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def squad_metrics(predictions, gold):
    """SQuAD v1.1 exact match and F1 in percent, averaged over the gold questions.

    Each prediction is scored against every gold answer after
    `normalize_answer`, keeping the best: exact match is 1 when the
    normalised strings are equal, F1 is the bag-of-tokens F1. A gold question
    without a prediction scores 0 (as in the official script, which logs
    it); it is counted in `num_unanswered`.

    Args:
        predictions: dict {question id: predicted answer text}, e.g. from
            `decode_squad_predictions`.
        gold: dict {question id: list of acceptable answer texts}, e.g. from
            `squad_gold_answers(reader.features)`. A single string is taken
            as a one-answer list.

    Returns:
        dict: `exact_match` and `f1` (floats in [0, 100]), `num_questions`,
        `num_unanswered`.

    Example:
    >>> squad_metrics({"q1": "the Alps", "q2": "1291"}, {"q1": ["Alps"], "q2": ["in 1291", "1291"]})
    {'exact_match': 100.0, 'f1': 100.0, 'num_questions': 2, 'num_unanswered': 0}
    """
    if not isinstance(predictions, dict) or not isinstance(gold, dict):
        raise ValueError(
            "predictions and gold must be dicts keyed by question id ({id: text} and {id: [answers]}). "
            f"Received: {type(predictions).__name__} and {type(gold).__name__}"
        )
    if not gold:
        raise ValueError("gold must hold at least one question. Received: gold={}")
    extra = [qid for qid in predictions if qid not in gold]
    if extra:
        raise ValueError(
            f"{len(extra)} predicted question ids are not in gold, e.g. {extra[:3]!r}: the predictions and "
            "the gold answers come from different files (or ids of different types, e.g. int vs str)."
        )
    bad = [qid for qid, text in predictions.items() if not isinstance(text, str)]
    if bad:
        raise ValueError(
            f"predictions must map ids to answer strings. Received: {bad[0]!r}: {predictions[bad[0]]!r}"
        )
    exact = f1 = 0.0
    unanswered = 0
    for qid, answers in gold.items():
        answers = [answers] if isinstance(answers, str) else answers
        if (
            not isinstance(answers, (list, tuple))
            or not answers
            or not all(isinstance(a, str) for a in answers)
        ):
            raise ValueError(
                f"gold[{qid!r}] must be a non-empty list of answer strings. Received: {answers!r}. SQuAD "
                "v2.0 unanswerable questions have none; SQuAD v1.1 scoring cannot score them (leave them "
                "out)."
            )
        if qid not in predictions:
            unanswered += 1
            continue
        prediction = predictions[qid]
        exact += max(float(normalize_answer(prediction) == normalize_answer(a)) for a in answers)
        f1 += max(_f1(prediction, a) for a in answers)
    return {
        "exact_match": 100.0 * exact / len(gold),
        "f1": 100.0 * f1 / len(gold),
        "num_questions": len(gold),
        "num_unanswered": unanswered,
    }
