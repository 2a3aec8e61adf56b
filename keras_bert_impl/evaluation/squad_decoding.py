"""Start/end logits over SquadReader windows -> one answer text per question.

Shape legend: N features (windows), S sequence length, K = n_best.
"""

import numpy as np

from keras_bert_impl.evaluation import _checks

_FEATURE_FIELDS = ("example_id", "answers", "context_offset", "token_is_max_context", "answer_text")


def best_squad_spans(features, start_logits, end_logits, max_answer_length=30, n_best=20):
    """The best-scoring valid answer span of each question, as Google's `run_squad.py` picks it.

    For each window, the `n_best` highest start logits and the `n_best`
    highest end logits (ties to the earlier position) are paired; a pair is
    valid when both positions are context wordpieces of the window,
    start <= end, end - start + 1 <= `max_answer_length`, and the window is
    the one where the start piece has its most centred view
    (`SquadFeature.is_max_context`), so a span is taken from the window
    that sees it best. (So, as in Google's, an answer is lost when the
    window that best sees its start cuts off its end; with BERT's usual
    384/128 windows that needs an answer of over 64 pieces.) The valid pair with the largest start + end logit
    over all windows of the question wins (ties to the earlier window, then
    the better-ranked start, then end: the order of Google's stable sort).

    Args:
        features: list of N `SquadFeature` (`SquadReader.features`), in the
            order of the logits rows; a question's windows may be anywhere.
        start_logits: float [N, S]. `BertSpanLabeler` output.
        end_logits: float [N, S].
        max_answer_length: int. Longest answer in wordpieces (Google: 30).
        n_best: int. Start and end candidates per window (Google: 20).

    Returns:
        dict {question id: span or None}, in order of first appearance. A
        span is a dict: `text` (`feature.answer_text(start, end)`, the
        original context characters), `feature_index` (row in `features`),
        `start`, `end` (row positions, inclusive), `start_logit`,
        `end_logit`, `score` (their sum). None when no window has a valid
        pair (possible only with tiny `n_best`).

    Example:
    >>> import json
    >>> from keras_bert_impl.data.readers import SquadReader
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> qa = {"id": "q1", "question": "Where is the grotto?",
    ...       "answers": [{"text": "Lourdes", "answer_start": 21}]}
    >>> with open("dev.json", "w") as f:
    ...     json.dump({"data": [{"paragraphs": [{"context": "The grotto stands at Lourdes in France.",
    ...                                          "qas": [qa]}]}]}, f)
    >>> reader = SquadReader(BertPreprocessor("data/minilm/vocab.txt", sequence_length=96))
    >>> x, y = next(iter(reader.read("dev.json")))
    >>> logits = np.eye(96)  # stand-ins for BertSpanLabeler's outputs, peaked on the labelled span
    >>> best_squad_spans(reader.features, logits[y["start_logits"]], logits[y["end_logits"]])
    {'q1': {'text': 'Lourdes', 'feature_index': 0, 'start': 13, 'end': 14, 'start_logit': 1.0, 'end_logit':
    1.0,
            'score': 2.0}}
    """
    features = _check_features(features)
    start_logits = _checks.as_scores("start_logits", start_logits, 2)
    end_logits = _checks.as_scores("end_logits", end_logits, 2)
    if start_logits.shape != end_logits.shape:
        raise ValueError(
            f"start_logits and end_logits must have the same shape [N, S]. Received: {start_logits.shape} "
            f"and {end_logits.shape}"
        )
    if len(features) != len(start_logits):
        raise ValueError(
            f"There must be one row of logits per feature. Received: {len(features)} features and "
            f"{len(start_logits)} rows; predict on the dataset from the same reader.read call, unshuffled."
        )
    max_answer_length = _checks.check_positive_int("max_answer_length", max_answer_length)
    n_best = _checks.check_positive_int("n_best", n_best)
    k = min(n_best, start_logits.shape[1])
    # Google's _get_best_indexes: a stable sort, so equal logits keep position order.
    top_starts = np.argsort(-start_logits, axis=1, kind="stable")[:, :k]  # [N, K]
    top_ends = np.argsort(-end_logits, axis=1, kind="stable")[:, :k]  # [N, K]

    best = {}
    for index, feature in enumerate(features):
        best.setdefault(feature.example_id, None)
        # Candidate pairs in Google's loop order: start rank outer, end rank inner.
        starts = np.repeat(top_starts[index], k)  # [K*K]
        ends = np.tile(top_ends[index], k)  # [K*K]
        first, last = starts - feature.context_offset, ends - feature.context_offset
        width = len(feature.token_is_max_context)
        inside = (first >= 0) & (first < width) & (last >= 0) & (last < width)
        max_context = np.zeros_like(inside)
        max_context[inside] = np.asarray(feature.token_is_max_context, bool)[first[inside]]
        valid = inside & max_context & (ends >= starts) & (ends - starts + 1 <= max_answer_length)
        if not valid.any():
            continue
        scores = (
            start_logits[index, starts] + end_logits[index, ends]
        )  # [K*K], float64 like Google's python floats
        scores[~valid] = -np.inf
        pick = int(np.argmax(scores))  # the first of equal maxima
        current = best[feature.example_id]
        if current is None or scores[pick] > current["score"]:
            start, end = int(starts[pick]), int(ends[pick])
            best[feature.example_id] = {
                "text": feature.answer_text(start, end),
                "feature_index": index,
                "start": start,
                "end": end,
                "start_logit": float(start_logits[index, start]),
                "end_logit": float(end_logits[index, end]),
                "score": float(scores[pick]),
            }
    return best


def decode_squad_predictions(features, start_logits, end_logits, max_answer_length=30, n_best=20):
    """One predicted answer text per question: the text of `best_squad_spans`.

    A question with no valid span gets "" (Google's script writes the
    placeholder "empty"). SQuAD v2.0 null answers are not decided here: the
    best non-null span is returned for every question.

    Args:
        features: list of `SquadFeature`, one per logits row (`SquadReader.features`).
        start_logits: float [N, S].
        end_logits: float [N, S].
        max_answer_length: int. Longest answer in wordpieces (Google: 30).
        n_best: int. Start and end candidates per window (Google: 20).

    Returns:
        dict {question id: answer text}, ready for `squad_metrics`.

    Example:
    >>> import json
    >>> from keras_bert_impl.data.readers import SquadReader
    >>> from keras_bert_impl.evaluation import squad_metrics
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> qa = {"id": "q1", "question": "When?", "answers": [{"text": "in 1858", "answer_start": 20}]}
    >>> with open("dev.json", "w") as f:
    ...     json.dump({"data": [{"paragraphs": [{"context": "Mary appeared there in 1858.",
    ...                                          "qas": [qa]}]}]}, f)
    >>> reader = SquadReader(BertPreprocessor("data/minilm/vocab.txt", sequence_length=96))
    >>> model = kb.BertSpanLabeler(kb.BertBackbone.from_preset("bert_tiny"))  # untrained: any span will do
    >>> out = model.predict(reader.read("dev.json"), verbose=0)  # an unshuffled dataset
    >>> predictions = decode_squad_predictions(reader.features, out["start_logits"], out["end_logits"])
    >>> squad_metrics(predictions, squad_gold_answers(reader.features))
    {'exact_match': ..., 'f1': ..., 'num_questions': 1, 'num_unanswered': 0}
    """
    spans = best_squad_spans(features, start_logits, end_logits, max_answer_length, n_best)
    return {qid: span["text"] if span is not None else "" for qid, span in spans.items()}


def squad_gold_answers(features):
    """{question id: list of gold answer texts} from `SquadReader.features` (every answer given in the file).

    Example:
    >>> import json
    >>> from keras_bert_impl.data.readers import SquadReader
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> qa = {"id": "q1", "question": "When?", "answers": [{"text": "1858", "answer_start": 23},
    ...                                                   {"text": "in 1858", "answer_start": 20}]}
    >>> with open("dev.json", "w") as f:
    ...     json.dump({"data": [{"paragraphs": [{"context": "Mary appeared there in 1858.",
    ...                                          "qas": [qa]}]}]}, f)
    >>> reader = SquadReader(BertPreprocessor("data/minilm/vocab.txt", sequence_length=96))
    >>> _ = reader.read("dev.json")
    >>> squad_gold_answers(reader.features)
    {'q1': ['1858', 'in 1858']}
    """
    gold = {}
    for feature in _check_features(features):
        gold.setdefault(feature.example_id, list(feature.answers))
    return gold


def _check_features(features):
    if isinstance(features, (str, bytes)) or not hasattr(features, "__iter__"):
        raise ValueError(
            f"features must be a list of SquadFeature (SquadReader.features). Received: {features!r:.80}"
        )
    features = list(features)
    for i, feature in enumerate(features):
        missing = [name for name in _FEATURE_FIELDS if not hasattr(feature, name)]
        if missing:
            raise ValueError(
                f"features[{i}] is not a SquadFeature (it lacks {missing}); pass SquadReader.features. "
                f"Received: {type(feature).__name__}"
            )
    return features
