"""Per-wordpiece tag ids (TaggingReader rows, model predictions) -> per-word tag strings.

Shape legend: N sentences, S wordpieces per row, C tags.
"""

import numpy as np

from keras_bert_impl.evaluation import _checks


def tags_from_wordpieces(label_ids, predictions, sample_weight, labels):
    """Gold and predicted tag strings per word, read off `TaggingReader` rows.

    `TaggingReader` puts each word's tag on its first wordpiece with sample
    weight 1; later pieces, [CLS], [SEP] and padding carry `ignore_label`
    and weight 0. So the words of a row are exactly its positions with
    weight > 0, in order, and the prediction for a word is the one at its
    first piece (BERT's NER recipe). Words cut off by `sequence_length` are
    not in the rows and so not in the result (the reader's report counts
    them as `truncated_words`).

    Args:
        label_ids: int [N, S] (or a list of N rows, lengths may differ). The
            reader's y.
        predictions: int [N, S] predicted tag ids, or float [N, S, C] logits
            or probabilities (argmax over C), row lengths as `label_ids`.
        sample_weight: float [N, S]. The reader's sample weights.
        labels: a `LabelVocabulary` or list of tag strings, id order (the
            reader's `labels`).

    Returns:
        (gold_tags, predicted_tags): two lists of N lists of tag strings, one
        tag per word, ready for `tagging_metrics`.

    Example:
    >>> gold, pred = tags_from_wordpieces(
    ...     [[0, 1, 0, 2, 0]], [[0, 1, 1, 0, 0]], [[0, 1, 0, 1, 0]], ["O", "B-PER", "I-PER"])
    >>> gold, pred
    ([['B-PER', 'I-PER']], [['B-PER', 'O']])
    """
    names = list(labels) if labels is not None and not isinstance(labels, str) else None
    if not names or any(not isinstance(n, str) for n in names):
        raise ValueError(
            "labels must be the tag vocabulary: a LabelVocabulary or a non-empty list of tag strings in id "
            f"order (TaggingReader.labels). Received: labels={labels!r:.80}"
        )
    label_rows, prediction_rows, weight_rows = (
        _rows("label_ids", label_ids),
        _rows("predictions", predictions),
        _rows("sample_weight", sample_weight),
    )
    if not len(label_rows) == len(prediction_rows) == len(weight_rows):
        raise ValueError(
            "label_ids, predictions and sample_weight must have one row per sentence. Received: "
            f"{len(label_rows)}, {len(prediction_rows)} and {len(weight_rows)} rows"
        )
    gold, predicted = [], []
    for i, (label_row, prediction_row, weight_row) in enumerate(
        zip(label_rows, prediction_rows, weight_rows)
    ):
        label_row = _checks.as_ids(f"label_ids[{i}]", label_row, 1)
        weight_row = _checks.as_scores(f"sample_weight[{i}]", weight_row, 1)
        prediction_row = np.asarray(prediction_row)
        if prediction_row.ndim == 2:
            prediction_row = _checks.as_scores(f"predictions[{i}]", prediction_row, 2)
            if prediction_row.shape[1] != len(names):
                raise ValueError(
                    f"predictions[{i}] has scores for {prediction_row.shape[1]} tags but labels has "
                    f"{len(names)}; pass the tag vocabulary the model was trained with."
                )
            prediction_row = np.argmax(prediction_row, axis=1)
        else:
            prediction_row = _checks.as_ids(f"predictions[{i}]", prediction_row, 1)
        if not len(label_row) == len(prediction_row) == len(weight_row):
            raise ValueError(
                f"row {i}: label_ids, predictions and sample_weight must be equally long (one entry per "
                f"wordpiece). Received lengths {len(label_row)}, {len(prediction_row)} and "
                f"{len(weight_row)}"
            )
        if np.any(weight_row < 0):
            raise ValueError(
                f"sample_weight[{i}] must be >= 0 (1 on each word's first piece). Received: "
                f"{weight_row.min()}"
            )
        words = weight_row > 0  # [S]
        _checks.check_range(f"label_ids[{i}] (where sample_weight > 0)", label_row[words], len(names))
        _checks.check_range(f"predictions[{i}] (where sample_weight > 0)", prediction_row[words], len(names))
        gold.append([names[t] for t in label_row[words]])
        predicted.append([names[t] for t in prediction_row[words]])
    return gold, predicted


def _rows(name, values):
    if isinstance(values, np.ndarray):
        if values.ndim < 2:
            raise ValueError(
                f"{name} must have one row per sentence ([N, S]). Received: shape {values.shape}"
            )
        return list(values)
    if hasattr(values, "numpy"):  # a tf.Tensor from the dataset
        return _rows(name, values.numpy())
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be an array [N, S] or a list of rows. Received: {values!r:.80}")
    return list(values)
