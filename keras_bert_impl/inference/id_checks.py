"""The checks a LiteRT forward pass needs before it runs a model's id inputs.

A TFLite interpreter checks none of this itself: a negative id is read from outside the
embedding table without a word (logits that look like any others), an id past it, or more
positions than the position table, fails as "gather index out of bounds ... Node number 21
(GATHER)", and inputs of different shapes fail inside XNNPACK's reshape. The exported ids
SavedModel holds the same checks in its graph, with the same messages
(keras_bert_impl_export.export_signatures), so a client hears one wording from every runtime.

Shape legend: B batch (examples), S sequence length (positions).
"""

import numpy as np


def check_id_arrays(arrays, sizes, max_sequence_length, shown_as=None):
    """Raises ValueError on the first bad input of `arrays`; returns nothing.

    Args:
        arrays: {input name: int array [B, S]}, the token ids first: the others must have its
            shape.
        sizes: {input name: n}: the input's values must lie in [0, n) (the vocabulary size,
            the segment table's, 2 for a padding mask).
        max_sequence_length: int. The most positions the model takes.
        shown_as: {input name: name in the message} (e.g. the exports' `ids` for the model's
            `token_ids`); default: the names themselves.

    Example:
    >>> ids = np.array([[101, 7, -1]])
    >>> try:
    ...     check_id_arrays({"token_ids": ids, "padding_mask": np.ones_like(ids)},
    ...                     {"token_ids": 30522, "padding_mask": 2}, 512)
    ... except ValueError as error:
    ...     print(error)
    Input token_ids holds -1 at example 0, position 2: this model takes values in [0, 30522) there.
    """
    shown_as = shown_as or {}
    names = list(arrays)
    shown = [shown_as.get(name, name) for name in names]
    first = np.shape(arrays[names[0]])
    for name, label in zip(names, shown):
        shape = np.shape(arrays[name])
        if len(shape) != 2:
            raise ValueError(f"Input {label} has shape {_shape(shape)}: send [examples, positions] of ids.")
        if shape != first:
            together = ", ".join(shown[:-1]) + " and " + shown[-1]
            raise ValueError(
                f"Input {label} has shape {_shape(shape)}, and {shown[0]} {_shape(first)}: send "
                f"{together} of one shape, [examples, positions]."
            )
    if not 1 <= first[1] <= max_sequence_length:
        raise ValueError(
            f"Input {shown[0]} has {first[1]} positions per example: this model takes 1 to "
            f"{max_sequence_length} (its max_sequence_length); send that many per example."
        )
    for name, label in zip(names, shown):
        values = np.asarray(arrays[name])
        bad = np.argwhere((values < 0) | (values >= sizes[name]))  # [N, 2]: (example, position), row-major
        if bad.size:
            row, column = (int(i) for i in bad[0])
            raise ValueError(
                f"Input {label} holds {int(values[row, column])} at example {row}, position {column}: "
                f"this model takes values in [0, {sizes[name]}) there."
            )


def _shape(shape):
    # As TensorFlow prints a shape tensor in the graph's messages: [2 9].
    return "[" + " ".join(str(d) for d in shape) + "]"
