"""What a task reader read from one file, and what it skipped and why."""

import collections
import logging

from keras_bert_impl.data.readers.malformed_row_error import MalformedRowError

logger = logging.getLogger("keras_bert_impl.data.readers")
# Marks the skip summary's log record (`extra`), so a caller that reports the skips in its own
# words (the kbert commands) can leave this one out and keep the readers' other warnings.
SKIP_SUMMARY = "kbert_skip_summary"

ON_ERROR_CHOICES = ("raise", "skip")
# Kept in full for the user to inspect; beyond this only the counts grow.
MAX_KEPT_ERRORS = 20


def check_on_error(on_error):
    if on_error not in ON_ERROR_CHOICES:
        raise ValueError(f"on_error must be one of {list(ON_ERROR_CHOICES)}. Received: on_error={on_error!r}")


class ReadReport:
    """Counts for one `read()`: examples produced, rows skipped per kind,
    reader-specific counters (truncated sequences, windows, ...) and rows per label
    (`label_counts`, from `ClassificationReader`).

    With `on_error="raise"`, `fail` raises the `MalformedRowError`; with
    `on_error="skip"` it counts the row and keeps the first errors, so nothing
    is dropped without a trace. `finish` logs a warning when rows were skipped.

    Args:
        path: str. The file being read.
        on_error: "raise" or "skip".

    Example:
    >>> report = ReadReport("train.csv", on_error="skip")
    >>> report.fail(3, "missing column 'text'", kind="missing_column")
    >>> report.skipped, report.skipped_by_kind["missing_column"]
    (1, 1)
    """

    def __init__(self, path, on_error="raise"):
        check_on_error(on_error)
        self.path = path
        self.on_error = on_error
        self.examples = 0
        self.skipped = 0
        self.skipped_by_kind = collections.Counter()
        self.errors = []
        self.counters = collections.Counter()
        # Rows per label as written in the file (labels of the rows kept), where a reader counts them.
        self.label_counts = collections.Counter()

    def fail(self, line, reason, kind="malformed", location=None, skippable=True):
        error = MalformedRowError(self.path, line, reason, kind=kind, location=location, skippable=skippable)
        if self.on_error == "raise" or not skippable:
            raise error
        self.skipped += 1
        self.skipped_by_kind[kind] += 1
        if len(self.errors) < MAX_KEPT_ERRORS:
            self.errors.append(error)

    def finish(self):
        """Logs the skips (a warning) and the counters; raises when nothing usable was left."""
        if self.skipped:
            kinds = ", ".join(f"{k}: {n}" for k, n in sorted(self.skipped_by_kind.items()))
            # The error's place and reason without its hint, which offers the on_error='skip' in force.
            first = f"{self.errors[0].where}: {self.errors[0].reason}"
            logger.warning(
                "%s: skipped %d malformed rows (%s); first: %s.",
                self.path,
                self.skipped,
                kinds,
                first,
                extra={SKIP_SUMMARY: True},
            )
        if self.examples == 0:
            detail = f" ({self.skipped} rows were skipped as malformed: {first})" if self.skipped else ""
            raise ValueError(f"{self.path} gave no examples{detail}.")
        return self

    def summary(self):
        parts = [f"{self.path}: {self.examples} examples", f"{self.skipped} skipped"]
        parts += [f"{k} {n}" for k, n in sorted(self.counters.items())]
        return ", ".join(parts)

    def __repr__(self):
        return (
            f"ReadReport(path={self.path!r}, examples={self.examples}, skipped={self.skipped}, "
            f"skipped_by_kind={dict(self.skipped_by_kind)}, counters={dict(self.counters)})"
        )
