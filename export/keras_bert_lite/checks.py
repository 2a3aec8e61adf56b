"""The argument check keras_bert_lite's classes share (the library's `validation` module is
keras_bert_impl's, whose import loads TensorFlow outside the `kbert` command)."""

import numbers


def positive_int(name, value):
    """`value` as a Python int >= 1 (numpy integers accepted; a bool is no count)."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer. Received: {name}={value!r}")
    return int(value)
