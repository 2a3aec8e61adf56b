"""Task files for `kbert finetune / evaluate / predict`: flags and readers.

A run folder keeps the data settings in task.json, so `evaluate` and `predict`
read files laid out like the training file without repeating the flags.
"""

import json
import os
import re
import sys

from keras_bert_impl.tasks import SEQUENCE_TASKS, TASKS  # noqa: F401 (the commands read both here)

TASK_FILE = "task.json"
DATA_KEYS = (
    "format",
    "text_column",
    "text_b_column",
    "label_column",
    "header",
    "columns",
    "tag_format",
    "tag_column",
    "doc_stride",
    "max_query_length",
)


DEFAULTS = {
    "text_column": "text",
    "text_b_column": None,
    "label_column": None,
    "header": True,
    "columns": None,
    "tag_format": "conll",
    "tag_column": -1,
    "doc_stride": 128,
    "max_query_length": 64,
    "format": None,
}


# (flag, the DEFAULTS key it defaults to or None, add_argument keywords), in `--help`'s order.
_LAYOUT_FLAGS = (
    (
        "--format",
        None,
        dict(
            choices=["csv", "tsv", "jsonl"],
            default=None,
            help="classification/pair/multilabel files: csv, tsv or jsonl. Default: by the file extension.",
        ),
    ),
    ("--text-column", "text_column", dict(help="Column or JSON key of the text. Default text.")),
    ("--text-b-column", "text_b_column", dict(help="pair: column of the second text. Default text_b.")),
    (
        "--label-column",
        "label_column",
        dict(help="Column of the label. Default label (labels for multilabel)."),
    ),
    (
        "--no-header",
        "header",
        dict(
            dest="header",
            action="store_const",
            const=False,
            help="CSV/TSV without a header row: give --columns.",
        ),
    ),
    (
        "--header",
        None,
        dict(
            dest="header",
            action="store_const",
            const=True,
            help="CSV/TSV with a header row naming the columns (the default; overrides a run's "
            "--no-header for evaluate and distill).",
        ),
    ),
    (
        "--columns",
        "columns",
        dict(help="Comma-separated column names of a headerless CSV/TSV, e.g. label,text (the MR file)."),
    ),
    (
        "--tag-format",
        "tag_format",
        dict(
            choices=["conll", "word/tag"],
            help="tagging: conll (word ... tag per line, blank line between sentences) or word/tag "
            "(a sentence per line, tokens like The/DT). Default conll.",
        ),
    ),
    (
        "--tag-column",
        "tag_column",
        dict(type=int, help="tagging, conll: column of the tag. Default -1 (last)."),
    ),
    (
        "--on-error",
        None,
        dict(
            choices=["fail", "skip"],
            default="fail",
            help="A malformed row (bad JSON, a missing column, an unknown label, invalid UTF-8 in a "
            "line-based file): fail names it (default); skip leaves it out, and the rows skipped are "
            "counted and the first ones shown.",
        ),
    ),
    (
        "--doc-stride",
        "doc_stride",
        dict(type=int, help="squad: wordpieces between context windows. Default 128."),
    ),
    (
        "--max-query-length",
        "max_query_length",
        dict(type=int, help="squad: question wordpieces kept. Default 64."),
    ),
)


def add_data_flags(parser, defaults_from_run=False):
    """Flags that say how a task file is laid out. With `defaults_from_run`, every
    default is None and the run folder's task.json (or the built-in default) fills it."""
    group = parser.add_argument_group("task file layout")
    for flag, key, keywords in _LAYOUT_FLAGS:
        if key is not None:
            keywords = dict(keywords, default=None if defaults_from_run else DEFAULTS[key])
        group.add_argument(flag, **keywords)


def data_settings(args, task, stored=None):
    """The layout settings: flags given now, else the run's stored ones, else defaults."""
    settings = {}
    for key in DATA_KEYS:
        value = getattr(args, key, None)
        if value is None:
            value = (stored or {}).get(key, DEFAULTS[key])
        settings[key] = value
    if task == "pair" and settings["text_b_column"] is None:
        settings["text_b_column"] = "text_b"
    if isinstance(settings["columns"], str):
        settings["columns"] = [c.strip() for c in settings["columns"].split(",") if c.strip()]
    return settings


# --on-error's words, and the readers' own.
_ON_ERROR = {"fail": "raise", "skip": "skip"}


def make_reader(task, preprocessor, settings, labels=None, on_error="fail", length_buckets=False, **reading):
    """The reader of `task`'s files. `on_error`: --on-error's word; `length_buckets`: the sequence
    tasks' batches of similar lengths, cut to their longest row (ClassificationReader); tagging and
    SQuAD read at the full sequence length. `reading`: the readers' batch_size, shuffle and seed
    (default: theirs)."""
    from keras_bert_impl.data.readers import ClassificationReader, SquadReader, TaggingReader

    common = dict(reading, on_error=_ON_ERROR[on_error])
    if task in SEQUENCE_TASKS:
        layout = _classification_layout(task, settings)
        return ClassificationReader(
            preprocessor, labels=labels, length_buckets=length_buckets, **layout, **common
        )
    if task == "tagging":
        return TaggingReader(
            preprocessor,
            file_format=settings["tag_format"],
            tag_column=settings["tag_column"],
            labels=labels,
            **common,
        )
    return SquadReader(
        preprocessor,
        doc_stride=settings["doc_stride"],
        max_query_length=settings["max_query_length"],
        **common,
    )


def _classification_layout(task, settings):
    header = settings["header"]
    return dict(
        text_column=settings["text_column"],
        text_b_column=settings["text_b_column"] if task == "pair" else None,
        label_column=settings["label_column"],
        multi_label=task == "multilabel",
        file_format=settings["format"],
        header=header,
        column_names=settings["columns"] if not header else None,
    )


# The readers speak their Python arguments; a CLI user types flags.
_FLAG_SPELLINGS = [
    (r"on_error='skip'", "--on-error skip"),
    (r"header=False", "--no-header"),
    (r"header=True", "--header"),
    (r"column_names=\[\.\.\.\]", "--columns"),
    (r"column_names=", "--columns "),
    (r"text_b_column=", "--text-b-column "),
    (r"text_column=", "--text-column "),
    (r"label_column=", "--label-column "),
    (r"pass file_format= one of", "pass --format, one of"),
]


def as_flags(message):
    """A reader's message with its Python argument names replaced by the CLI's flags."""
    message = message.replace("text_column=/label_column=", "--text-column/--label-column")
    for pattern, flag in _FLAG_SPELLINGS:
        message = re.sub(pattern, flag, message)
    return message


def read_checked(reader, path, flag, command, method="read", unknown_label_hint=None, **kwargs):
    """`reader.<method>(path)` for a CLI command: a malformed row or file is a UsageError in the
    CLI's words; rows skipped under --on-error skip are counted on stderr, the first shown."""
    from keras_bert_impl.commands.errors import UsageError
    from keras_bert_impl.data.readers import MalformedRowError
    from keras_bert_impl.data.readers.read_report import SKIP_SUMMARY, logger

    def not_the_skip_summary(record):  # said below in the command's words, once
        return not getattr(record, SKIP_SUMMARY, False)

    logger.addFilter(not_the_skip_summary)
    try:
        result = getattr(reader, method)(path, **kwargs)
    except MalformedRowError as e:
        if e.kind == "unknown_label" and unknown_label_hint:
            raise UsageError(f"{flag} {path} line {e.line}: {e.reason}. {unknown_label_hint}") from None
        raise UsageError(as_flags(f"{flag} {e}")) from None
    except ValueError as e:
        raise UsageError(as_flags(f"{flag} {path}: {e}")) from None
    finally:
        logger.removeFilter(not_the_skip_summary)
    report = reader.report
    if report is not None and report.skipped:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(report.skipped_by_kind.items()))
        first = report.errors[0]
        print(
            f"kbert {command}: {flag} {path}: skipped {report.skipped} malformed row(s) ({kinds}); the "
            f"first, line {first.line}: {first.reason}",
            file=sys.stderr,
        )
    return result


def task_of_model(model, has_text_b=False):
    """The task a loaded head was trained for (a QuantizationAwareClassifier's: its classifier's)."""
    import keras_bert_impl as kb

    if isinstance(model, kb.QuantizationAwareClassifier):
        model = model.classifier
    if isinstance(model, kb.BertClassifier):
        return "multilabel" if model.multi_label else ("pair" if has_text_b else "classification")
    if isinstance(model, kb.BertTokenClassifier):
        return "tagging"
    if isinstance(model, kb.BertSpanLabeler):
        return "squad"
    raise ValueError(
        f"The model is a {type(model).__name__}: evaluate and predict take a fine-tuned BertClassifier, "
        "BertTokenClassifier or BertSpanLabeler (the model.keras of a kbert finetune run)."
    )


def read_task_file(run_dir):
    path = os.path.join(run_dir, TASK_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)
