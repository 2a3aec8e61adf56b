"""Sequence tagging metrics: token accuracy and conlleval/seqeval-style entity (chunk) precision,
recall, F1."""

import re

import numpy as np

from keras_bert_impl.evaluation import _checks

# O, or a B-/I-/E-/S- prefix and a non-empty type (IOB1, IOB2/BIO, IOE, IOBES).
_CHUNK_TAG = re.compile(r"^(?:O|[BIES]-.+)$", re.DOTALL)


def extract_entities(tags):
    """The entity chunks of one tag sequence, as seqeval's default (non-strict) mode finds them.

    This is conlleval's chunk logic: a chunk starts at B- or S-, at an I- or
    E- after O/E-/S- or after a different type (so an I- without a B-
    starts a chunk), and ends before O, B-, S-, a type switch, or after an
    E-/S-. Tags are "O" or a prefix B-/I-/E-/S- and a type ("B-PER").

    Args:
        tags: list of str. One sentence's tags.

    Returns:
        list of (type, first, last) tuples, `last` inclusive, in order.

    Example:
    >>> extract_entities(["B-PER", "I-PER", "O", "I-LOC", "E-LOC", "S-ORG"])
    [('PER', 0, 1), ('LOC', 3, 4), ('ORG', 5, 5)]
    """
    tags = list(tags)
    _check_chunk_tags(tags, "tags")
    chunks = []
    prev_tag, prev_type, begin = "O", "", 0
    for i, tag in enumerate(tags + ["O"]):
        prefix, type_ = (tag[0], tag[2:]) if tag != "O" else ("O", "")
        if _ends(prev_tag, prefix, prev_type, type_):
            chunks.append((prev_type, begin, i - 1))
        if _starts(prev_tag, prefix, prev_type, type_):
            begin = i
        prev_tag, prev_type = prefix, type_
    return chunks


def _ends(prev, tag, prev_type, type_):
    """Whether a chunk ended between the previous word and this one (conlleval's endOfChunk)."""
    if prev in ("E", "S"):
        return True
    if prev in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev != "O" and prev_type != type_


def _starts(prev, tag, prev_type, type_):
    """Whether a chunk starts at this word (conlleval's startOfChunk)."""
    if tag in ("B", "S"):
        return True
    if tag in ("I", "E") and prev in ("E", "S", "O"):
        return True
    return tag != "O" and prev_type != type_


def _check_chunk_tags(tags, where):
    bad = [t for t in tags if not isinstance(t, str) or not _CHUNK_TAG.match(t)]
    if bad:
        raise ValueError(
            f"{where}: entity tags must be 'O' or a B-/I-/E-/S- prefix with a type (e.g. 'B-PER'). "
            f"Received: {_checks.preview(dict.fromkeys(bad))}. Convert BILOU tags (U- -> S-, L- -> E-) "
            "first; for tag sets without entities (part of speech) pass entities=False."
        )


def tagging_metrics(gold_tags, predicted_tags, entities=None):
    """Token accuracy and micro-averaged entity precision/recall/F1 of tag sequences.

    Token accuracy counts every word given (seqeval's `accuracy_score`);
    use `tags_from_wordpieces` first to keep only real words. Entities are
    extracted per sentence with `extract_entities` (seqeval's default mode,
    like conlleval) and an entity counts as correct when its type, first and
    last word all match. Zero division gives 0 (seqeval/scikit-learn
    `zero_division=0`), so a test set with no entities at all scores 0.

    Args:
        gold_tags: list of sentences, each a list of tag strings.
        predicted_tags: the same shape as `gold_tags`.
        entities: bool or None. Compute entity metrics; None does when every
            tag is "O" or B-/I-/E-/S-TYPE, skips them when no tag but "O" is
            (part of speech), and raises on a mix. True requires every tag to
            be an entity tag.

    Returns:
        dict of plain python numbers: `num_sentences`, `num_tokens`,
        `token_accuracy`; with entities also `entity_precision`,
        `entity_recall`, `entity_f1`, `num_gold_entities`,
        `num_predicted_entities` and `per_type`:
        {type: {"precision", "recall", "f1", "support", "predicted"}}.

    Example:
    >>> m = tagging_metrics([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "O"]])
    >>> m["token_accuracy"], m["entity_precision"], m["entity_recall"]
    (0.75, 1.0, 0.5)
    """
    gold = _sentences("gold_tags", gold_tags)
    predicted = _sentences("predicted_tags", predicted_tags)
    if len(gold) != len(predicted):
        raise ValueError(
            f"gold_tags and predicted_tags must have the same number of sentences. Received: {len(gold)} "
            f"and {len(predicted)}"
        )
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if len(g) != len(p):
            raise ValueError(
                f"sentence {i} has {len(g)} gold tags but {len(p)} predicted tags; every word needs one of "
                f"each. Received: gold={_checks.preview(g)}, predicted={_checks.preview(p)}"
            )
    num_tokens = sum(len(g) for g in gold)
    if num_tokens == 0:
        raise ValueError("tagging_metrics needs at least one tagged word. Received: only empty sentences")
    correct = sum(a == b for g, p in zip(gold, predicted) for a, b in zip(g, p))
    result = {"num_sentences": len(gold), "num_tokens": num_tokens, "token_accuracy": correct / num_tokens}
    if entities is None:
        distinct = {t for s in gold + predicted for t in s}
        chunky = {t for t in distinct if _CHUNK_TAG.match(t)}
        if chunky - {"O"} and chunky != distinct:
            _check_chunk_tags(sorted(distinct - chunky), "tags")  # a mix: say which ones are not entity tags
        entities = chunky == distinct
    elif not isinstance(entities, bool):
        raise ValueError(f"entities must be True, False or None. Received: entities={entities!r}")
    if entities:
        for i, (g, p) in enumerate(zip(gold, predicted)):
            _check_chunk_tags(g, f"gold_tags[{i}]")
            _check_chunk_tags(p, f"predicted_tags[{i}]")
        result.update(_entity_metrics(gold, predicted))
    return result


def _sentences(name, sentences):
    if isinstance(sentences, str) or not hasattr(sentences, "__iter__"):
        raise ValueError(
            f"{name} must be a list of sentences, each a list of tags. Received: {sentences!r:.80}"
        )
    sentences = [list(s) if not isinstance(s, str) else s for s in sentences]
    flat = [i for i, s in enumerate(sentences) if isinstance(s, str)]
    if flat:
        raise ValueError(
            f"{name} must be a list of sentences, each a list of tags; item {flat[0]} is the string "
            f"{sentences[flat[0]]!r}. For one sentence wrap it: [{name}]."
        )
    bad = [t for s in sentences for t in s if not isinstance(t, str)]
    if bad:
        raise ValueError(
            f"{name} must hold tag strings. Received: {_checks.preview(bad)}; map ids to tags first "
            "(tags_from_wordpieces)"
        )
    return sentences


def _entity_metrics(gold, predicted):
    gold_set, predicted_set = set(), set()
    for i, (g, p) in enumerate(zip(gold, predicted)):
        gold_set.update((i,) + chunk for chunk in extract_entities(g))
        predicted_set.update((i,) + chunk for chunk in extract_entities(p))
    hits = gold_set & predicted_set
    types = sorted({c[1] for c in gold_set | predicted_set})
    tp = np.array([sum(c[1] == t for c in hits) for t in types], np.int64)
    support = np.array([sum(c[1] == t for c in gold_set) for t in types], np.int64)
    counted = np.array([sum(c[1] == t for c in predicted_set) for t in types], np.int64)
    precision, recall, f1 = _checks.precision_recall_f1(tp, counted, support)
    micro_p, micro_r, micro_f1 = _checks.precision_recall_f1(len(hits), len(predicted_set), len(gold_set))
    return {
        "entity_precision": float(micro_p),
        "entity_recall": float(micro_r),
        "entity_f1": float(micro_f1),
        "num_gold_entities": len(gold_set),
        "num_predicted_entities": len(predicted_set),
        "per_type": _checks.per_class_dict(types, precision, recall, f1, support, counted),
    }
