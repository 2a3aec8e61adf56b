"""The error of a model that a transformers folder cannot hold as it is."""


class NotExpressibleError(ValueError):
    """Our model differs from every transformers BERT class in a way their config cannot
    say (mean pooling, sinusoidal positions, int8 weights, ...). The message names the
    difference and the fix, in one line; nothing has been written."""
