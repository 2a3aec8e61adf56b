"""Argument checks shared by layers and models; every error quotes the value."""


def check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer. Received: {name}={value!r}")


def check_probability(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a float in [0, 1). Received: {name}={value!r}")


def check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}. Received: {name}={value!r}")


def check_divisible(hidden_dim, num_heads):
    if hidden_dim % num_heads != 0:
        raise ValueError(
            "hidden_dim must be divisible by num_heads. "
            f"Received: hidden_dim={hidden_dim}, num_heads={num_heads}. "
            f"Pick num_heads among the divisors of {hidden_dim} (BERT uses hidden_dim // 64)."
        )


def check_label_names(label_names, num_classes):
    """None, or one distinct non-empty string per class (saved with the model for predict/export)."""
    if label_names is None:
        return None
    names = list(label_names) if isinstance(label_names, (list, tuple)) else None
    if names is None or any(not isinstance(n, str) or not n for n in names) or len(set(names)) != len(names):
        raise ValueError(
            f"label_names must be a list of distinct non-empty strings, one per class. Received: label_names={label_names!r}"
        )
    if len(names) != num_classes:
        raise ValueError(
            f"label_names must name each of the num_classes={num_classes} classes. "
            f"Received: {len(names)} names: {names!r}"
        )
    return names
