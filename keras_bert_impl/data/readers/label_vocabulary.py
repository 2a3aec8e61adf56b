"""Class names <-> class ids, learned from a training file and saved beside a model."""

import json
import math

from keras_bert_impl.atomic_write import write_json_atomically
from keras_bert_impl.validation import check_distinct_names


def _as_number(label):
    try:
        value = float(label)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


class LabelVocabulary:
    """An ordered list of distinct label strings; a label's id is its position.

    `from_values` sorts the labels so the ids do not depend on row order:
    numerically when every label is a number (so "-1", "1", "2", "10" keep
    their natural order), as strings otherwise. Save it with the model and
    load it back so predictions map to the same names.

    Args:
        labels: sequence of distinct, non-empty strings, in id order.

    Example:
    >>> vocab = LabelVocabulary.from_values(["pos", "neg", "pos"])
    >>> vocab.labels, vocab.index("pos")
    (['neg', 'pos'], 1)
    """

    def __init__(self, labels):
        labels = list(labels)
        check_distinct_names("Labels", labels)
        if not labels:
            raise ValueError("A label vocabulary needs at least one label. Received: labels=[]")
        self.labels = labels
        self._ids = {label: i for i, label in enumerate(labels)}

    @classmethod
    def from_values(cls, values):
        distinct = set(values)
        numbers = {label: _as_number(label) for label in distinct}
        if all(n is not None for n in numbers.values()):
            ordered = sorted(distinct, key=lambda label: (numbers[label], label))
        else:
            ordered = sorted(distinct)
        return cls(ordered)

    def index(self, label):
        """The id of `label`; KeyError (naming the known labels) when it is not in the vocabulary."""
        try:
            return self._ids[label]
        except KeyError:
            raise KeyError(f"unknown label {label!r}; the vocabulary has {self._preview()}") from None

    def _preview(self):
        shown = ", ".join(repr(label) for label in self.labels[:10])
        return f"[{shown}{', ...' if len(self.labels) > 10 else ''}] ({len(self.labels)} labels)"

    def save(self, path):
        """Writes {"labels": [...]} as JSON, atomically (temporary file, then rename)."""
        write_json_atomically({"labels": self.labels}, path, ensure_ascii=False, indent=1)

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"{path}:{e.lineno}: not a label vocabulary file (invalid JSON: {e.msg})."
                ) from None
        if not isinstance(data, dict) or not isinstance(data.get("labels"), list):
            raise ValueError(
                f'{path}: a label vocabulary file holds {{"labels": [...]}}. Received: {str(data)[:80]!r}'
            )
        return cls(data["labels"])

    def __len__(self):
        return len(self.labels)

    def __iter__(self):
        return iter(self.labels)

    def __contains__(self, label):
        return label in self._ids

    def __eq__(self, other):
        return isinstance(other, LabelVocabulary) and other.labels == self.labels

    def __repr__(self):
        return f"LabelVocabulary({self.labels!r})"
