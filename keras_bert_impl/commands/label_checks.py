"""The labels of a training file, checked before training: counts reported, one class
refused, spellings of one label ("1" and "1.0", "Pos" and "pos") refused unless asked for."""

import collections
import sys

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.tasks import SEQUENCE_TASKS


def label_key(label):
    """What two spellings of one label share: the number a numeric label means, else the
    label case-folded with its whitespace collapsed."""
    try:
        number = float(label)
    except ValueError:
        number = float("nan")
    if number == number:
        return repr(number)
    return " ".join(label.split()).casefold()


def variants(labels):
    """Groups of labels (at least two) that look like spellings of one label."""
    groups = collections.defaultdict(list)
    for label in labels:
        groups[label_key(label)].append(label)
    return sorted(sorted(group) for group in groups.values() if len(group) > 1)


def _counts(counts):
    return ", ".join(
        f"{label!r} {n}" for label, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )


def check_training_labels(task, train_path, train_counts, allow_variants=False):
    """Refuses a training file that would train a useless or wrong head (before the
    validation file is read, whose labels must be the training file's). `train_counts`:
    rows per label as written (`ReadReport.label_counts`)."""
    if task not in SEQUENCE_TASKS:
        return
    if task != "multilabel" and len(train_counts) < 2:
        only = next(iter(train_counts), None)
        raise UsageError(
            f"--train {train_path} has one label only ({only!r} on all {sum(train_counts.values())} rows): a "
            "classifier needs examples of at least two classes. Check --label-column, or add the other "
            "classes."
        )
    groups = variants(train_counts)
    if groups and not allow_variants:
        shown = "; ".join(
            " and ".join(f"{label!r} ({train_counts[label]} rows)" for label in group) for group in groups
        )
        raise UsageError(
            f"--train {train_path} has labels that look like spellings of one label: {shown}. Each would be "
            "a class of its own: make them one in the file, or pass --allow-label-variants if they are "
            "different classes."
        )


def report_labels(task, train_counts, validation_path, validation_counts, log=None):
    """Prints the rows per label of both files; for multi-label, the labels the validation
    file never has."""
    log = log or (lambda line: print(line, file=sys.stderr))
    if task not in SEQUENCE_TASKS:
        return
    log(f"labels: --train {_counts(train_counts)}; --validation {_counts(validation_counts)}")
    if task == "multilabel":
        never = sorted(set(train_counts) - set(validation_counts))
        if never:
            log(
                f"warning: no --validation {validation_path} row has the label(s) "
                f"{', '.join(map(repr, never))}: their F1 there is undefined (counted as 0 in macro-F1)"
            )
