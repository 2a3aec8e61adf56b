"""A seeded validation part of a labelled file, the same share of every label."""

import collections

import numpy as np


def stratified_split(keys, fraction, seed):
    """(train indices, validation indices), each in file order: `fraction` of each key's
    rows (rounded; at least one, and one left for training, when a key has two or more
    rows) drawn by `numpy.random.default_rng(seed)`, keys taken in sorted order.

    Example:
    >>> stratified_split(["a", "b", "a", "b", "a", "b"], fraction=0.34, seed=0)
    ([0, 1, 2, 3], [4, 5])
    """
    rng = np.random.default_rng(seed)
    rows = collections.defaultdict(list)
    for index, key in enumerate(keys):
        rows[key].append(index)
    validation = []
    for key in sorted(rows):
        indices = rows[key]
        count = int(round(fraction * len(indices)))
        if len(indices) >= 2:
            count = min(max(count, 1), len(indices) - 1)
        else:
            count = 0
        validation.extend(rng.permutation(indices)[:count].tolist())
    held = set(validation)
    return [i for i in range(len(keys)) if i not in held], sorted(validation)
