"""The accuracy a masked LM gets without looking: always the most frequent masked token."""

import itertools

import numpy as np


def unigram_baseline(dataset, batches=200):
    """(token id, accuracy) of always predicting the most frequent masked token, over the
    first `batches` batches of a pretraining dataset ((x, y, sample weights) with an
    "mlm_logits" entry, as `PretrainingRecordReader.dataset` gives); (None, None) when no
    position is masked.

    Example:
    >>> y = {"mlm_logits": np.array([[5, 5, 7, 0]])}
    >>> w = {"mlm_logits": np.array([[1.0, 1.0, 1.0, 0.0]])}
    >>> unigram_baseline([({}, y, w)])
    (5, 0.6666666666666666)
    """
    counts = {}
    total = 0.0
    for _, y, w in itertools.islice(dataset, batches):
        ids = np.asarray(y["mlm_logits"]).ravel()
        weights = np.asarray(w["mlm_logits"]).ravel()
        for token, weight in zip(ids[weights > 0], weights[weights > 0]):
            counts[int(token)] = counts.get(int(token), 0.0) + float(weight)
        total += float(weights.sum())
    if not counts:
        return None, None
    token = max(counts, key=counts.get)
    return token, counts[token] / total
