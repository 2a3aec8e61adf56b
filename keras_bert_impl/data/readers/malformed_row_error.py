"""The error every task reader raises for a row it cannot use."""


class MalformedRowError(ValueError):
    """A row (or the whole file) a reader cannot turn into an example.

    A `ValueError`, so callers that already catch bad input keep working, with
    the place and the cause as fields for callers that report or collect them.

    Args:
        path: str. The file.
        line: int or None. 1-based line where the row starts (None when the
            format gives no line, e.g. a SQuAD entry that could not be located).
        reason: str. What is wrong, quoting the offending value.
        kind: str. Short machine-readable category, e.g. "bad_json",
            "missing_column", "unknown_label", "label_out_of_range",
            "answer_not_in_context"; skipped rows are counted per kind.
        location: optional str. Where inside a structured file, e.g.
            "data[0].paragraphs[1].qas[2] (id 5733be28)".
        skippable: bool. False for problems with the whole file (a header
            without the text column, invalid JSON in a SQuAD file), which
            `on_error="skip"` cannot work around.

    Example:
    >>> err = MalformedRowError("dev.jsonl", 12, "unknown label 'sport'", kind="unknown_label")
    >>> str(err)
    "dev.jsonl:12: unknown label 'sport'. Fix the row, or pass on_error='skip' to skip and count such rows."
    """

    def __init__(self, path, line, reason, kind="malformed", location=None, skippable=True):
        self.path = path
        self.line = line
        self.reason = reason
        self.kind = kind
        self.location = location
        self.skippable = skippable
        where = f"{path}:{line}" if line is not None else f"{path}"
        if location:
            where += f" [{location}]"
        self.where = where  # "path:line [location]"
        hint = " Fix the row, or pass on_error='skip' to skip and count such rows." if skippable else ""
        super().__init__(f"{where}: {reason}.{hint}")

    def __reduce__(self):
        return (type(self), (self.path, self.line, self.reason, self.kind, self.location, self.skippable))
