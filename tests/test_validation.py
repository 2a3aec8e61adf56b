"""One rule per kind of argument (keras_bert_impl/validation.py), used by every layer, reader and metric."""

import numpy as np
import pytest

from keras_bert_impl.validation import (
    check_bool,
    check_choice,
    check_fraction,
    check_int,
    check_label_names,
    check_non_negative,
    check_positive_int,
    check_probability,
    check_sequence_length,
)


def test_integers():
    assert check_positive_int("n", np.int64(3)) == 3 and isinstance(check_positive_int("n", np.int64(3)), int)
    assert check_int("seed", None, allow_none=True) is None
    assert check_int("k", 0, minimum=0) == 0
    for bad in (0, -1, True, 1.0, "1", None):
        with pytest.raises(ValueError, match=f"n must be a positive integer. Received: n={bad!r}"):
            check_positive_int("n", bad)
    with pytest.raises(ValueError, match=r"size must be an integer >= 9. Received: size=8"):
        check_int("size", 8, minimum=9)
    with pytest.raises(ValueError, match=r"steps must be a positive integer or None. Received: steps=0"):
        check_positive_int("steps", 0, allow_none=True)


def test_fractions_bools_choices():
    assert check_probability("dropout", 0) == 0.0
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\). Received: dropout=1.0"):
        check_probability("dropout", 1.0)
    with pytest.raises(ValueError, match=r"p must be a number in \(0, 1\]. Received: p=0"):
        check_fraction("p", 0, open_low=True, open_high=False)
    with pytest.raises(ValueError, match="flag must be True or False. Received: flag=1"):
        check_bool("flag", 1)
    with pytest.raises(
        ValueError, match=r"pooling must be one of \['cls', 'mean'\]. Received: pooling='max'"
    ):
        check_choice("pooling", "max", ("cls", "mean"))


def test_non_negative_numbers():
    assert check_non_negative("hidden_weight", 0) == 0.0 and check_non_negative("w", np.float32(0.5)) == 0.5
    for bad in (-0.1, float("nan"), float("inf"), True, "1", None):
        with pytest.raises(ValueError, match=f"w must be a number >= 0. Received: w={bad!r}"):
            check_non_negative("w", bad)


def test_label_names():
    assert check_label_names(None, 3) is None
    assert check_label_names(("a", "b"), 2) == ["a", "b"]
    with pytest.raises(ValueError, match="not one string"):
        check_label_names("ab", 2)
    with pytest.raises(ValueError, match=r"label_names must be distinct. Received duplicates: \['a'\]"):
        check_label_names(["a", "a"], 2)
    with pytest.raises(ValueError, match=r"label_names must be non-empty strings. Received: \[''\]"):
        check_label_names(["a", ""], 2)
    with pytest.raises(ValueError, match=r"label_names must name each of the 3 labels. Received 2 names"):
        check_label_names(["a", "b"], 3, what="labels")


def test_sequence_lengths():
    """One rule for a length a model can take: 0 and negatives are out of range like 100000."""
    assert check_sequence_length("sequence_length", np.int32(64), 64) == 64
    assert check_sequence_length("--seq-len", 2, 512, minimum=2) == 2
    for bad in (0, -1, 2, 65, 100000, 16.0, None, True):
        with pytest.raises(
            ValueError,
            match=rf"^--seq-len {bad!r} is outside 3\.\.64: at least 3 wordpieces .* "
            r"max_sequence_length=64 \(its position embeddings\)\. Pass --seq-len from 3 to 64\.$",
        ):
            check_sequence_length("--seq-len", bad, 64)
