"""The CLI's one kind of expected failure."""


class UsageError(ValueError):
    """A flag or input that cannot work; printed as `kbert CMD: message`, exit status 2."""
