"""Multi-label classification metrics from multi-hot targets and per-label scores.

Shape legend: N examples, C labels.
"""

import numpy as np

from keras_bert_impl.evaluation import _checks


def multilabel_metrics(targets, scores, threshold=0.5, from_logits=False, label_names=None):
    """Micro/macro F1, exact-match (subset) accuracy and per-label F1 of multi-label predictions.

    A label is predicted when its probability is strictly greater than
    `threshold` (Keras' `BinaryAccuracy`/`F1Score` rule); with
    `from_logits=True` the probability is sigmoid(score). Zero division
    follows scikit-learn's `zero_division=0`, and as in scikit-learn's
    multi-label `average="macro"` every label counts in the macro average,
    so a label neither present nor predicted adds an F1 of 0.

    Args:
        targets: [N, C] multi-hot gold labels (0/1, bool, int or float).
        scores: float [N, C]. Probabilities in [0, 1], or logits with
            `from_logits=True` (what `BertClassifier(multi_label=True)`
            outputs without an activation).
        threshold: float in (0, 1). Probability above which a label is on.
        from_logits: bool. Apply a sigmoid to `scores` first.
        label_names: list of str or a `LabelVocabulary`, or None. Keys of
            `per_label` (default "0", "1", ...).

    Returns:
        dict of plain python numbers: `num_examples`, `num_labels`,
        `exact_match` (all C decisions right), `label_accuracy` (fraction of
        right decisions, 1 - Hamming loss), `micro_precision`,
        `micro_recall`, `micro_f1`, `macro_f1`, and `per_label`:
        {name: {"precision", "recall", "f1", "support", "predicted"}}.

    Example:
    >>> m = multilabel_metrics([[1, 0], [1, 1]], [[2.0, -1.0], [0.5, -3.0]], from_logits=True)
    >>> m["exact_match"], m["micro_f1"]
    (0.5, 0.8)
    """
    targets = np.asarray(targets)
    if targets.ndim != 2:
        raise ValueError(f"targets must be multi-hot [N, C]. Received: targets with shape {targets.shape}")
    if targets.dtype != bool:
        numeric = _checks.as_scores("targets", targets, 2)
        bad = numeric[(numeric != 0) & (numeric != 1)]
        if bad.size:
            raise ValueError(
                "targets must be multi-hot (only 0 and 1). Received other values: "
                f"{_checks.preview(np.unique(bad))}"
            )
        targets = numeric == 1
    scores = _checks.as_scores("scores", scores, 2)
    if scores.shape != targets.shape:
        raise ValueError(
            f"targets and scores must have the same shape [N, C]. Received: targets {targets.shape}, scores "
            f"{scores.shape}"
        )
    if len(targets) == 0 or targets.shape[1] == 0:
        raise ValueError(
            f"multilabel_metrics needs at least one example and one label. Received: shape {targets.shape}"
        )
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float, np.floating))
        or not 0 < threshold < 1
    ):
        raise ValueError(
            "threshold must be a probability strictly between 0 and 1 (it applies after the sigmoid when "
            f"from_logits=True). Received: threshold={threshold!r}"
        )
    if not isinstance(from_logits, bool):
        raise ValueError(f"from_logits must be True or False. Received: from_logits={from_logits!r}")
    if from_logits:
        probabilities = _sigmoid(scores)
    else:
        if scores.min() < 0 or scores.max() > 1:
            raise ValueError(
                "scores must be probabilities in [0, 1] unless from_logits=True. "
                f"Received values in [{scores.min():g}, {scores.max():g}]; pass from_logits=True for logits."
            )
        probabilities = scores
    names = _checks.names_for(label_names, targets.shape[1], "labels")
    predicted = probabilities > threshold  # [N, C]

    tp = np.sum(targets & predicted, axis=0)  # [C]
    support = np.sum(targets, axis=0)  # [C]
    counted = np.sum(predicted, axis=0)  # [C]
    precision, recall, f1 = _checks.precision_recall_f1(tp, counted, support)
    micro_p, micro_r, micro_f1 = _checks.precision_recall_f1(tp.sum(), counted.sum(), support.sum())
    return {
        "num_examples": int(targets.shape[0]),
        "num_labels": int(targets.shape[1]),
        "exact_match": float(np.mean(np.all(targets == predicted, axis=1))),
        "label_accuracy": float(np.mean(targets == predicted)),
        "micro_precision": float(micro_p),
        "micro_recall": float(micro_r),
        "micro_f1": float(micro_f1),
        "macro_f1": float(np.mean(f1)),
        "per_label": _checks.per_class_dict(names, precision, recall, f1, support, counted),
    }


def _sigmoid(x):
    # exp of a negative argument only, so large |x| neither overflows nor warns.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
