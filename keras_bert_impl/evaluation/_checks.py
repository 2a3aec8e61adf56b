"""Input checks and small numeric helpers shared by the metric modules (numpy only)."""

import numpy as np

# Re-exported for the metric modules.
from keras_bert_impl.validation import check_label_names, check_positive_int, preview  # noqa: F401


def _numeric_array(name, values, ndim, shaped, holding):
    """`values` as an array of rank `ndim` holding integers or floats (not booleans); the errors say
    what `name` must be (`shaped`) and hold (`holding`)."""
    array = np.asarray(values)
    if array.ndim != ndim:
        raise ValueError(f"{name} must be {shaped}. Received: {name} with shape {array.shape}")
    if array.dtype == bool or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise ValueError(f"{name} must hold {holding}. Received: {name} of dtype {array.dtype}")
    return array


def as_ids(name, values, ndim):
    """`values` as an int64 array of rank `ndim`; floats are accepted only when they hold whole numbers."""
    array = _numeric_array(name, values, ndim, f"{ndim}-D integer class ids", "integer class ids")
    if np.issubdtype(array.dtype, np.floating):
        bad = array[~np.isfinite(array) | (array != np.round(array))] if array.size else array
        if bad.size:
            raise ValueError(
                f"{name} must hold integer class ids; these are not whole numbers: {preview(bad.ravel())}. "
                "Pass class ids, not scores (for scores of shape [N, C] pass them as predictions and the "
                "argmax is taken)."
            )
    return array.astype(np.int64)


def check_range(name, ids, num_classes):
    bad = ids[(ids < 0) | (ids >= num_classes)]
    if bad.size:
        raise ValueError(
            f"{name} must be class ids in [0, {num_classes}). Received out-of-range ids "
            f"{preview(np.unique(bad))}; pass num_classes (or label_names) covering every class, or check "
            "that the ids come from the same label vocabulary."
        )


def as_scores(name, values, ndim):
    """`values` as a finite float64 array of rank `ndim`."""
    array = _numeric_array(name, values, ndim, f"a {ndim}-D array of scores", "numbers").astype(np.float64)
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0].tolist()
        raise ValueError(f"{name} must be finite. Received: {array[tuple(bad)]} at index {bad}")
    return array


def names_for(label_names, count, what):
    """`count` string names: `label_names` (a list of str or a LabelVocabulary) checked, or "0".."count-1"."""
    names = check_label_names(label_names, count, what)
    return [str(i) for i in range(count)] if names is None else names


def divide(numerator, denominator):
    """numerator / denominator elementwise, 0 where the denominator is 0 (scikit-learn's zero_division=0)."""
    numerator = np.asarray(numerator, np.float64)
    denominator = np.asarray(denominator, np.float64)
    return np.divide(
        numerator,
        denominator,
        out=np.zeros(np.broadcast(numerator, denominator).shape),
        where=denominator != 0,
    )


def precision_recall_f1(tp, predicted, support):
    """Per-class precision, recall and F1 from counts, zero where undefined.

    F1 is 2*tp / (predicted + support), which equals 2PR/(P+R) when both are
    defined and is 0 when the class was neither predicted nor present (the
    scikit-learn formula).
    """
    return (
        divide(tp, predicted),
        divide(tp, support),
        divide(2 * np.asarray(tp), np.asarray(predicted) + np.asarray(support)),
    )


def per_class_dict(names, precision, recall, f1, support, predicted):
    return {
        name: {
            "precision": float(p),
            "recall": float(r),
            "f1": float(f),
            "support": int(s),
            "predicted": int(n),
        }
        for name, p, r, f, s, n in zip(names, precision, recall, f1, support, predicted)
    }
