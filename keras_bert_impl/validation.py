"""Argument checks for every part of the library; each error quotes the name and the value.

Plain Python (no TensorFlow, no Keras), so layers, data readers, tokenization,
training and the numpy metrics all share one rule per kind of argument.
"""

import numbers

# The sequence length, in wordpieces, of every command and class that is not told one (Google's
# BERT pretrains and fine-tunes at 128 by default).
DEFAULT_SEQUENCE_LENGTH = 128


def _is_int(value):
    # bool is an int subclass, but True is never a sensible count.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name, value, minimum=None, allow_none=False):
    """`value` as a Python int >= `minimum` (numpy integers accepted), or None when allowed."""
    if value is None and allow_none:
        return None
    if not _is_int(value) or (minimum is not None and value < minimum):
        if minimum == 1:
            wanted = "a positive integer"
        elif minimum is None:
            wanted = "an integer"
        else:
            wanted = f"an integer >= {minimum}"
        raise ValueError(
            f"{name} must be {wanted}{' or None' if allow_none else ''}. Received: {name}={value!r}"
        )
    return int(value)


def check_positive_int(name, value, allow_none=False):
    return check_int(name, value, minimum=1, allow_none=allow_none)


def check_bool(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False. Received: {name}={value!r}")
    return value


def check_fraction(name, value, open_low=True, open_high=True):
    """A number in (0, 1), or with closed ends where asked; returned as float."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        ok = (value > 0 if open_low else value >= 0) and (value < 1 if open_high else value <= 1)
    if not ok:
        interval = f"{'(' if open_low else '['}0, 1{')' if open_high else ']'}"
        raise ValueError(f"{name} must be a number in {interval}. Received: {name}={value!r}")
    return float(value)


def check_non_negative(name, value):
    """A finite number >= 0 (a loss weight); returned as float."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 <= value < float("inf")
    if not ok:
        raise ValueError(f"{name} must be a number >= 0. Received: {name}={value!r}")
    return float(value)


def check_probability(name, value):
    """A dropout-style rate: a number in [0, 1)."""
    return check_fraction(name, value, open_low=False, open_high=True)


def check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}. Received: {name}={value!r}")
    return value


def check_sequence_length(name, value, max_sequence_length, minimum=3):
    """A sequence length a model can take, as an int: at least `minimum` wordpieces ([CLS],
    one of the text's and [SEP]; a pair needs a second [SEP]), at most the model's
    max_sequence_length (its position embeddings). 0 and negatives are refused like any
    other value out of range, never read as "not given".

    The one check of a length for the library's classes (`name="sequence_length"`) and the
    commands (`name="--seq-len"`), so each says the same."""
    if not _is_int(value) or not minimum <= value <= max_sequence_length:
        raise ValueError(
            f"{name} {value!r} is outside {minimum}..{max_sequence_length}: at least {minimum} wordpieces "
            f"([CLS], [SEP] and the text), at most the model's max_sequence_length={max_sequence_length} "
            f"(its position embeddings). Pass {name} from {minimum} to {max_sequence_length}."
        )
    return int(value)


def check_divisible(hidden_dim, num_heads):
    if hidden_dim % num_heads != 0:
        raise ValueError(
            "hidden_dim must be divisible by num_heads. "
            f"Received: hidden_dim={hidden_dim}, num_heads={num_heads}. "
            f"Pick num_heads among the divisors of {hidden_dim} (BERT uses hidden_dim // 64)."
        )


def check_distinct_names(name, names):
    """`names` (a list) must be distinct non-empty strings; the errors call them `name`."""
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise ValueError(f"{name} must be non-empty strings. Received: {preview(bad)}")
    if len(set(names)) != len(names):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"{name} must be distinct. Received duplicates: {preview(duplicates)}")


def check_label_names(label_names, count, what="classes"):
    """None, or `count` distinct non-empty strings (a list, tuple or any iterable of them
    except a single string); returned as a list.

    The names of a head's classes (saved with the model for predict and export) and
    the names the metrics report share this rule."""
    if label_names is None:
        return None
    if isinstance(label_names, (str, bytes)):
        raise ValueError(
            f"label_names must be a list of names, not one string. Received: label_names={label_names!r}"
        )
    try:
        names = list(label_names)
    except TypeError:
        raise ValueError(
            f"label_names must be a list of distinct non-empty strings. Received: label_names={label_names!r}"
        ) from None
    check_distinct_names("label_names", names)
    if len(names) != count:
        raise ValueError(
            f"label_names must name each of the {count} {what}. Received {len(names)} names: {preview(names)}"
        )
    return names


def preview(values, limit=5):
    """A short repr of the first few items of `values`, for error messages."""
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    shown = ", ".join(repr(v) for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}]"
