"""The error the Distiller and its terms raise for a bad argument, naming the argument."""


class DistillationArgumentError(ValueError):
    """A bad argument of the `Distiller` (or of one of its terms).

    A `ValueError`, so callers that catch bad input keep working, with the argument's name
    as a field: a caller that knows the argument under another name (the `kbert distill`
    flags) reports it by that field, never by reading the message.

    Args:
        argument: str. The constructor argument at fault: "teacher", "student",
            "temperature", "alpha", "layer_map", "hidden_weight", "attention_weight" or
            "embedding_weight".
        message: str. What is wrong, quoting the value, and the fix.

    Example:
    >>> error = DistillationArgumentError("layer_map", "layer_map must be ... Received: layer_map='every'")
    >>> error.argument
    'layer_map'
    """

    def __init__(self, argument, message):
        super().__init__(message)
        self.argument = argument
