"""The MR (Pang & Lee sentence polarity) data and its 80/20 stratified split with seed 0.

Needs only numpy, so the same split is available in the project venv and in a reference
venv without scikit-learn (PyTorch + transformers).

`mr_split` is scikit-learn's
`train_test_split(texts, labels, test_size=0.2, stratify=labels, random_state=0)`
re-implemented in numpy: the algorithm of `StratifiedShuffleSplit._iter_indices` with a
legacy `np.random.RandomState(seed)`, and the same sizes (`n_test = ceil(0.2 * n)`,
`n_train = n - n_test`). It returns the indices in scikit-learn's order (shuffled, not
sorted). Run this module in a venv with scikit-learn to check that the two agree:

    .venv/bin/python -m bench.corpora.mr_split

`own_split` is the split of the first finetune_mr.json (`stratified_split`: per class a
`np.random.default_rng(seed)` permutation, the first 20% of each class held out), kept
here so that it can be compared without importing TensorFlow.
"""

import csv
import hashlib
import math
import os

import numpy as np

from bench.common import MR


def load_mr(path=MR, strip=True):
    """Texts and labels of polarity-en-pang&lee2.csv; labels as in the file (1 / -1)."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    texts = [text.strip() if strip else text for _, text in rows]
    labels = np.array([int(label) for label, _ in rows])
    return texts, labels


def write_csv(path, rows):
    """Rows as a fully quoted UTF-8 CSV, the layout of the MR file (headerless label,text)."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)


def write_mr_split(folder, seed=0, subset=None):
    """Writes the 80/20 split as folder/mr_train.csv and folder/mr_test.csv (the file's own
    layout); returns (texts, labels, train_idx, test_idx, train_csv, test_csv). `subset`:
    keep only the first N sentences of each part (`take_subset`)."""
    texts, labels = load_mr()
    train_idx, test_idx = take_subset(*mr_split(texts, labels, seed=seed), subset)
    train_csv, test_csv = os.path.join(folder, "mr_train.csv"), os.path.join(folder, "mr_test.csv")
    write_csv(train_csv, [(str(labels[i]), texts[i]) for i in train_idx])
    write_csv(test_csv, [(str(labels[i]), texts[i]) for i in test_idx])
    return texts, labels, train_idx, test_idx, train_csv, test_csv


def take_subset(train_idx, test_idx, subset):
    """The first `subset` indices of each part (all of them for None): a smoke run's data,
    the same on both sides of a comparison. Its accuracies say nothing about the task."""
    if subset is None:
        return train_idx, test_idx
    if subset < 1:
        raise ValueError(f"subset must be a positive number of sentences. Received: subset={subset}")
    return train_idx[:subset], test_idx[:subset]


def test_indices_sha256(test_idx):
    """A fingerprint of the held-out sentences, so a run in the other venv can be checked
    to have held out the same ones."""
    return hashlib.sha256(",".join(map(str, sorted(int(i) for i in test_idx))).encode()).hexdigest()


def _approximate_mode(class_counts, n_draws, rng):
    # scikit-learn's sklearn.utils.extmath._approximate_mode
    continuous = class_counts / class_counts.sum() * n_draws
    floored = np.floor(continuous)
    need_to_add = int(n_draws - floored.sum())
    if need_to_add > 0:
        remainder = continuous - floored
        values = np.sort(np.unique(remainder))[::-1]
        for value in values:
            (inds,) = np.where(remainder == value)
            add_now = min(len(inds), need_to_add)
            inds = rng.choice(inds, size=add_now, replace=False)
            floored[inds] += 1
            need_to_add -= add_now
            if need_to_add == 0:
                break
    return floored.astype(int)


def mr_split(texts, labels, seed=0, test_size=0.2):
    """(train_idx, test_idx) identical to scikit-learn's stratified train_test_split."""
    labels = np.asarray(labels)
    n = len(labels)
    if len(texts) != n:
        raise ValueError(f"{len(texts)} texts but {n} labels")
    n_test = int(math.ceil(test_size * n))
    n_train = n - n_test
    classes, y_indices = np.unique(labels, return_inverse=True)
    class_counts = np.bincount(y_indices)
    if class_counts.min() < 2:
        raise ValueError("every class needs at least two members")
    class_indices = np.split(np.argsort(y_indices, kind="mergesort"), np.cumsum(class_counts)[:-1])
    rng = np.random.RandomState(seed)
    n_i = _approximate_mode(class_counts, n_train, rng)
    t_i = _approximate_mode(class_counts - n_i, n_test, rng)
    train, test = [], []
    for i in range(len(classes)):
        permutation = rng.permutation(class_counts[i])
        members = class_indices[i].take(permutation, mode="clip")
        train.extend(members[: n_i[i]])
        test.extend(members[n_i[i] : n_i[i] + t_i[i]])
    return rng.permutation(train), rng.permutation(test)


def own_split(texts, labels, seed=0, test_fraction=0.2):
    """The split of the first finetune_mr.json (its stratified_split on 0/1 labels), sorted indices."""
    labels = (np.asarray(labels) > 0).astype(int)
    rng = np.random.default_rng(seed)
    train, test = [], []
    for value in sorted(set(labels.tolist())):
        rows = rng.permutation(np.flatnonzero(labels == value))
        cut = int(round(len(rows) * test_fraction))
        test.extend(rows[:cut])
        train.extend(rows[cut:])
    return np.array(sorted(train)), np.array(sorted(test))


SPLITS = {"sklearn": mr_split, "own": own_split}


def _check_against_sklearn():
    from sklearn.model_selection import StratifiedShuffleSplit, train_test_split

    texts, labels = load_mr()
    index = np.arange(len(labels))
    for seed in (0, 1, 42):
        ours = mr_split(texts, labels, seed=seed)
        theirs = train_test_split(index, test_size=0.2, stratify=labels, random_state=seed)
        sss = next(StratifiedShuffleSplit(n_splits=1, test_size=0.2, random_state=seed).split(index, labels))
        for a, b, c in zip(ours, theirs, sss):
            assert np.array_equal(a, b) and np.array_equal(a, c), (
                f"seed {seed}: split differs from scikit-learn"
            )
    # odd class sizes, three classes: exercises the tie-breaking in _approximate_mode
    y = np.array([0] * 7 + [1] * 11 + [2] * 5)
    for seed in range(5):
        for size in (0.2, 0.3):
            ours = mr_split(list(y), y, seed=seed, test_size=size)
            theirs = train_test_split(np.arange(len(y)), test_size=size, stratify=y, random_state=seed)
            assert all(np.array_equal(a, b) for a, b in zip(ours, theirs)), (seed, size)
    train, test = mr_split(texts, labels)
    print(
        f"mr_split matches scikit-learn's train_test_split; {len(train)} train, {len(test)} test, "
        f"test positives {(labels[test] == 1).sum()}, first test indices {test[:5].tolist()}"
    )


if __name__ == "__main__":
    _check_against_sklearn()
