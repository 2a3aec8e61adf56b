"""Single-label classification metrics: accuracy, macro/weighted F1, per-class precision/recall/F1.

Shape legend: N examples, C classes.
"""

import numpy as np

from keras_bert_impl.evaluation import _checks


def classification_metrics(labels, predictions, num_classes=None, label_names=None):
    """Accuracy, macro-averaged and per-class precision/recall/F1 of single-label predictions.

    Zero division follows scikit-learn's `zero_division=0`: a class never
    predicted has precision 0, a class absent from `labels` has recall 0,
    and F1 is 2*tp / (predicted + support) (0 when both are 0). As in
    scikit-learn's `average="macro"` without `labels=`, the macro and
    weighted averages run over the classes that occur in `labels` or in the
    predictions; `per_class` lists every class (absent ones with zeros and
    support 0, not counted in the averages).

    Args:
        labels: int [N]. Gold class ids.
        predictions: int [N] predicted class ids, or float [N, C] logits or
            probabilities (the argmax over C is the prediction; ties go to
            the lower id).
        num_classes: int or None. Number of classes; None takes it from
            `label_names`, the scores' C, or the largest id seen + 1.
        label_names: list of str or a `LabelVocabulary`, or None. Names used
            as the keys of `per_class` (default "0", "1", ...).

    Returns:
        dict of plain python numbers: `num_examples`, `accuracy`,
        `macro_precision`, `macro_recall`, `macro_f1`, `weighted_f1`
        (per-class F1 weighted by support), and `per_class`:
        {name: {"precision", "recall", "f1", "support", "predicted"}}.

    Example:
    >>> m = classification_metrics([0, 1, 1, 2], [0, 1, 0, 2], label_names=["neg", "pos", "mixed"])
    >>> m["accuracy"], round(m["macro_f1"], 4), m["per_class"]["pos"]["recall"]
    (0.75, 0.7778, 0.5)
    """
    labels = _checks.as_ids("labels", labels, 1)
    scores = np.asarray(predictions)
    if scores.ndim == 2:
        scores = _checks.as_scores("predictions", scores, 2)
        if scores.shape[1] < 1:
            raise ValueError(
                f"predictions of shape [N, C] need C >= 1 classes. Received: shape {scores.shape}"
            )
        predicted = np.argmax(scores, axis=1)
    elif scores.ndim == 1:
        predicted = _checks.as_ids("predictions", scores, 1)
    else:
        raise ValueError(
            "predictions must be class ids [N] or scores [N, C]. "
            f"Received: predictions with shape {scores.shape}"
        )
    if len(labels) != len(predicted):
        raise ValueError(
            "labels and predictions must have one entry per example. "
            f"Received: {len(labels)} labels and {len(predicted)} predictions"
        )
    if len(labels) == 0:
        raise ValueError("classification_metrics needs at least one example. Received: 0 labels")
    num_classes = _num_classes(num_classes, label_names, scores, labels, predicted)
    names = _checks.names_for(label_names, num_classes, "classes")
    _checks.check_range("labels", labels, num_classes)
    _checks.check_range("predictions", predicted, num_classes)

    support = np.bincount(labels, minlength=num_classes)  # [C]
    counted = np.bincount(predicted, minlength=num_classes)  # [C]
    tp = np.bincount(labels[labels == predicted], minlength=num_classes)  # [C]
    precision, recall, f1 = _checks.precision_recall_f1(tp, counted, support)
    seen = (support + counted) > 0  # scikit-learn's unique_labels(y_true, y_pred)
    return {
        "num_examples": int(len(labels)),
        "accuracy": float(np.mean(labels == predicted)),
        "macro_precision": float(np.mean(precision[seen])),
        "macro_recall": float(np.mean(recall[seen])),
        "macro_f1": float(np.mean(f1[seen])),
        "weighted_f1": float(np.sum(f1 * support) / np.sum(support)),
        "per_class": _checks.per_class_dict(names, precision, recall, f1, support, counted),
    }


def _num_classes(num_classes, label_names, scores, labels, predicted):
    candidates = {}
    if num_classes is not None:
        candidates["num_classes"] = _checks.check_positive_int("num_classes", num_classes)
    if label_names is not None and not isinstance(label_names, str):
        candidates["len(label_names)"] = len(list(label_names))
    if scores.ndim == 2:
        candidates["predictions.shape[1]"] = scores.shape[1]
    if len(set(candidates.values())) > 1:
        said = ", ".join(f"{k}={v}" for k, v in candidates.items())
        raise ValueError(f"The number of classes is given inconsistently: {said}. Make them agree.")
    if candidates:
        return next(iter(candidates.values()))
    return int(max(labels.max(), predicted.max(), 0)) + 1
