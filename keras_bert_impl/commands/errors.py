"""The CLI's kinds of expected failure."""


class UsageError(ValueError):
    """A flag or input that cannot work; printed as `kbert CMD: message`, exit status 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so that every `finally` and
    `with` written for Ctrl-C (temporary folders, `.partial` folders, backups) runs for it too."""
