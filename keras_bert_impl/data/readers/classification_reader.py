"""CSV / TSV / JSONL text-classification files -> tf.data batches of (BERT inputs, labels).

Shape legend: B batch, S sequence length, C number of classes.
"""

import ast
import csv
import json
import math
import os

import numpy as np
import tensorflow as tf

from keras_bert_impl.data.length_buckets import cut_to_longest, wordpiece_lengths
from keras_bert_impl.data.readers import _common
from keras_bert_impl.data.readers.label_vocabulary import LabelVocabulary
from keras_bert_impl.data.readers.malformed_row_error import MalformedRowError
from keras_bert_impl.data.readers.read_report import ReadReport, logger
from keras_bert_impl.tokenization.vocabulary import duplicate_tokens
from keras_bert_impl.validation import check_bool

FORMATS = ("csv", "tsv", "jsonl")
LABEL_MODES = ("vocabulary", "index", "float")
_EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}


class ClassificationReader:
    """Reads single-sentence or sentence-pair classification files for `BertClassifier`.

    Each row has a `text`, optionally a `text_b` (sentence pairs, packed as
    `[CLS] A [SEP] B [SEP]`), and either one `label` or, with
    `multi_label=True`, several `labels` (a JSON list, or a string split on
    `label_delimiter`). The rows are read and checked up front, so a bad row
    fails before training starts, with its file and line; the dataset then
    batches the strings and runs the `BertPreprocessor` in a batched map.

    Labels, by `label_mode`:
    - "vocabulary": class names. The first `read` builds a sorted
      `LabelVocabulary` from that (training) file unless `labels` was given;
      later reads map through it, and a label it lacks is a malformed row.
      Save `reader.labels` with the model.
    - "index": integer class ids already, kept as they are; ids outside
      [0, num_classes) are malformed rows.
    - "float": numbers kept as float32 (regression, e.g. STS-B scores).

    y is int32 [B] ("vocabulary"/"index"), float32 [B] ("float"), or a
    multi-hot float32 [B, C] with `multi_label=True`.

    CSV files use standard quoting (fields may hold commas, quotes and line
    breaks); TSV files are read without quote processing, as GLUE's are.
    A UTF-8 byte-order mark is dropped. For headerless files give the column
    order: the movie-review file `polarity-en-pang&lee2.csv` (rows
    `"1","the rock is ..."`) reads with `header=False,
    column_names=("label", "text")`.

    Args:
        preprocessor: a `BertPreprocessor` with a vocabulary.
        text_column: str. Column (or JSON key) of the first text.
        text_b_column: str or None. Column of the second text for pairs.
        label_column: str or None. Defaults to "label", or "labels" with
            `multi_label=True`.
        multi_label: bool. Several labels per row, multi-hot targets.
        label_mode: "vocabulary", "index" or "float" (see above).
        num_classes: int. Required for "index"; the number of classes.
        labels: `LabelVocabulary` or list of names: a fixed vocabulary
            ("vocabulary" mode), e.g. loaded from a trained model.
        label_delimiter: str. Splits a multi-label string field; a field
            written as a list (JSON `["a", "b"]`, or pandas' `['a', 'b']`
            of a list column) is read as that list.
        file_format: "csv", "tsv", "jsonl", or None to go by the extension
            (.csv; .tsv/.tab; .jsonl/.ndjson/.json).
        header: bool. CSV/TSV: the first row names the columns.
        column_names: CSV/TSV with `header=False`: the column names in order.
        batch_size: int.
        shuffle: bool. Shuffle the examples each epoch (training).
        seed: int or None. Shuffle seed.
        length_buckets: bool. Batch texts of similar wordpiece length together (shuffled
            within chunks, batches in random order; `read` then needs an int `epochs` when
            shuffling) and cut every batch to its longest row (rounded up to 8) instead of
            padding it to the sequence length: the same model outputs, a fraction of the
            work on short texts (kbert finetune's default).
        on_error: "raise" (default) stops at the first malformed row with a
            `MalformedRowError` (file, line, reason); "skip" skips such rows,
            counts them in `reader.report` and logs a warning.

    Example:
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> pre = BertPreprocessor("data/minilm/vocab.txt", sequence_length=64)
    >>> reader = ClassificationReader(pre, header=False, column_names=("label", "text"))
    >>> train = reader.read("data/corpora/polarity-en-pang&lee2.csv")
    >>> reader.labels.labels, reader.report.examples
    (['-1', '1'], 4000)
    >>> x, y = next(iter(train))  # y: label ids, 0 for "-1" and 1 for "1"
    >>> x["token_ids"].shape, y.shape
    (TensorShape([32, 64]), TensorShape([32]))
    """

    def __init__(
        self,
        preprocessor,
        text_column="text",
        text_b_column=None,
        label_column=None,
        multi_label=False,
        label_mode="vocabulary",
        num_classes=None,
        labels=None,
        label_delimiter=",",
        file_format=None,
        header=True,
        column_names=None,
        batch_size=32,
        shuffle=False,
        seed=None,
        on_error="raise",
        length_buckets=False,
    ):
        _common.preprocessor_settings(preprocessor)
        if label_mode not in LABEL_MODES:
            raise ValueError(
                f"label_mode must be one of {list(LABEL_MODES)}. Received: label_mode={label_mode!r}"
            )
        if file_format is not None and file_format not in FORMATS:
            raise ValueError(
                f"file_format must be one of {list(FORMATS)} or None. Received: file_format={file_format!r}"
            )
        _check_columns(text_column, label_column, text_b_column)
        check_bool("multi_label", multi_label)
        labels = _checked_labels(label_mode, num_classes, multi_label, labels)
        if not isinstance(label_delimiter, str) or not label_delimiter:
            raise ValueError(
                f"label_delimiter must be a non-empty string. Received: label_delimiter={label_delimiter!r}"
            )
        check_bool("header", header)
        column_names = _checked_column_names(header, column_names)
        _common.set_reading(self, preprocessor, batch_size, shuffle, seed, on_error)
        self.text_column = text_column
        self.text_b_column = text_b_column
        self.label_column = label_column or ("labels" if multi_label else "label")
        self.multi_label = multi_label
        self.label_mode = label_mode
        self._index_classes = num_classes
        self.labels = labels
        self.label_delimiter = label_delimiter
        self.file_format = file_format
        self.header = header
        self.column_names = column_names
        self.length_buckets = check_bool("length_buckets", length_buckets)
        self.report = None
        if column_names is not None:
            missing = [c for c in self._required_columns() if c not in column_names]
            if missing:
                raise ValueError(
                    f"column_names={column_names!r} lacks the column(s) {missing!r} this reader needs "
                    f"(text_column={self.text_column!r}, text_b_column={self.text_b_column!r}, "
                    f"label_column={self.label_column!r})."
                )

    @property
    def num_classes(self):
        """Width of the classifier: classes in the vocabulary, `num_classes` for ids, 1 for floats."""
        if self.label_mode == "index":
            return self._index_classes
        if self.label_mode == "float":
            return 1
        return len(self.labels) if self.labels is not None else None

    def read(self, path, build_labels=None, epochs=None):
        """Reads one file into a `tf.data.Dataset` of (x, y) batches.

        Args:
            path: the CSV/TSV/JSONL file.
            build_labels: bool or None. Build the label vocabulary from this
                file (replacing any); None builds it when there is none yet,
                so the first file read should be the training file.
            epochs: int or None. None: one pass (reshuffled each time it is
                iterated, for `model.fit(..., epochs=N)`). An int: that many
                passes in one dataset, pass e ordered by (seed, e) alone, the
                same in every run: what `fit_resumable` needs to resume exactly.

        Returns:
            `tf.data.Dataset` of (x, y): x the preprocessor's dict
            (`token_ids`, `segment_ids`, `padding_mask`, int32 [B, S]).
            `reader.report` holds the counts (examples, skipped rows by kind).
        """
        _common.check_epochs(epochs)
        return self._dataset(*self.read_examples(path, build_labels), epochs=epochs)

    def read_examples(self, path, build_labels=None):
        """Reads one file into its raw examples, checked as `read` checks them.

        Returns:
            (texts, texts_b, targets): lists of strings (texts_b holds None for single-text
            files) and the encoded labels (class ids, or multi-hot float32 arrays), what the
            export's calibration and report run on. `reader.report` holds the counts.
        """
        path = _common.check_file(path)
        report = ReadReport(path, self.on_error)
        self.report = report
        rows = []
        for line, row in self._rows(path, report):
            parsed = self._parse_row(line, row, report)
            if parsed is not None:
                rows.append(parsed)
        if self.label_mode == "vocabulary" and (
            build_labels or (build_labels is None and self.labels is None)
        ):
            values = [label for *_, raw in rows for label in (raw if self.multi_label else [raw])]
            if not values:
                report.finish()
            self.labels = LabelVocabulary.from_values(values)
            logger.info("%s: label vocabulary of %d labels built from this file", path, len(self.labels))
        texts, texts_b, targets = [], [], []
        for line, text, text_b, raw in rows:
            target = self._encode_label(line, raw, report)
            if target is None:
                continue
            texts.append(text)
            texts_b.append(text_b)
            targets.append(target)
            report.label_counts.update(raw if self.multi_label else [raw])
        report.examples = len(texts)
        report.finish()
        return texts, texts_b, targets

    # -- rows -----------------------------------------------------------------

    def _format_of(self, path):
        if self.file_format is not None:
            return self.file_format
        ext = os.path.splitext(path)[1].lower()
        if ext not in _EXTENSIONS:
            raise ValueError(
                f"Cannot tell the format of {path!r} from its extension {ext!r}: pass file_format= one of "
                f"{list(FORMATS)}."
            )
        return _EXTENSIONS[ext]

    def _required_columns(self):
        return [c for c in (self.text_column, self.text_b_column, self.label_column) if c is not None]

    def _rows(self, path, report):
        """Yields (line, {column: value}) for every row with the right shape."""
        file_format = self._format_of(path)
        if file_format == "jsonl":
            yield from self._jsonl_rows(path, report)
        else:
            yield from self._delimited_rows(path, report, file_format)

    def _jsonl_rows(self, path, report):
        for line, text in _common.decoded_lines(path, report, skippable=True):
            if not text.strip():
                continue  # blank lines separate nothing in JSONL; they are not rows
            try:
                row = json.loads(text)
            except json.JSONDecodeError as e:
                report.fail(
                    line,
                    f"invalid JSON ({e.msg} at column {e.colno}): {text.strip()[:60]!r}",
                    kind="bad_json",
                )
                continue
            if not isinstance(row, dict):
                report.fail(
                    line, f"expected a JSON object per line. Received: {text.strip()[:60]!r}", kind="bad_json"
                )
                continue
            yield line, row

    def _delimited_rows(self, path, report, file_format):
        if file_format == "tsv":
            options = {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
        else:
            options = {"delimiter": ",", "quotechar": '"', "doublequote": True, "strict": True}
        lines = (text for _, text in _common.decoded_lines(path))
        reader = csv.reader(lines, **options)
        names = self.column_names
        consumed, consumed_data = 0, False
        while True:
            start = consumed + 1
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as e:
                raise MalformedRowError(
                    path, start, f"unreadable {file_format.upper()} ({e})", kind="bad_csv", skippable=False
                ) from None
            consumed = reader.line_num
            if not fields:
                continue  # a blank line
            if names is None:
                names = self._header_names(path, start, fields)
                continue
            if len(fields) != len(names):
                if len(fields) < len(names):
                    missing = [c for c in names[len(fields) :] if c in self._required_columns()]
                    kind = "missing_column" if missing else "field_count"
                    reason = f"has {len(fields)} fields but the columns are {names!r}"
                    reason += f"; missing {missing!r}" if missing else ""
                else:
                    kind = "field_count"
                    reason = (
                        f"has {len(fields)} fields but the columns are {names!r} (an unquoted delimiter in "
                        "the text?)"
                    )
                report.fail(start, reason, kind=kind)
                continue
            if (
                not self.header
                and not consumed_data
                and [f.strip().lower() for f in fields] == [n.lower() for n in names]
            ):
                raise MalformedRowError(
                    path,
                    start,
                    f"the first row {fields!r} is a header (the column names), but the reader was told the "
                    "file has none (header=False): read it with header=True (without column_names=[...]), "
                    "or remove the row",
                    kind="header_as_data",
                    skippable=False,
                )
            consumed_data = True
            yield start, dict(zip(names, fields))

    def _header_names(self, path, start, fields):
        """The column names of the header row `fields` (line `start`), checked."""
        if not self.header:
            raise ValueError(f"{path}: header=False needs column_names=[...] to name the columns.")
        names = [name.strip() for name in fields]
        twice = sorted(set(duplicate_tokens(names)))
        if twice:  # a row read into a dict would keep the last of them without a word
            raise MalformedRowError(
                path,
                start,
                f"the header {names!r} names the column(s) {twice!r} more than once; rename "
                "them so each column has its own name",
                kind="duplicate_column",
                skippable=False,
            )
        missing = [c for c in self._required_columns() if c not in names]
        if missing:
            raise MalformedRowError(
                path,
                start,
                f"the header {names!r} lacks the column(s) {missing!r}; pass "
                "text_column=/label_column= naming yours, or header=False with column_names= for a "
                "headerless file",
                kind="missing_column",
                skippable=False,
            )
        return names

    def _parse_row(self, line, row, report):
        """(line, text, text_b, raw label) with labels as strings / lists of strings, or None when skipped."""
        texts = []
        for column in (self.text_column, self.text_b_column):
            if column is None:
                texts.append(None)
                continue
            value = row.get(column)
            if value is None:
                report.fail(
                    line, f"missing column {column!r} (the row has {sorted(row)!r})", kind="missing_column"
                )
                return None
            if not isinstance(value, str):
                report.fail(line, f"column {column!r} must hold text. Received: {value!r}", kind="bad_text")
                return None
            if not value.strip():  # it would be an example of [CLS] [SEP] alone, with the row's label
                report.fail(
                    line,
                    f"column {column!r} is empty: give the row its text, or remove the row",
                    kind="empty_text",
                )
                return None
            texts.append(value)
        if self.label_column not in row:
            report.fail(
                line,
                f"missing column {self.label_column!r} (the row has {sorted(row)!r})",
                kind="missing_column",
            )
            return None
        if row[self.label_column] is None:
            report.fail(
                line,
                f"column {self.label_column!r} is null: give the row its label or remove the row",
                kind="bad_label",
            )
            return None
        raw = row[self.label_column]
        try:
            label = self._label_strings(raw) if self.multi_label else self._label_string(raw)
        except ValueError as e:
            report.fail(line, str(e), kind="bad_label")
            return None
        return line, texts[0], texts[1], label

    def _label_string(self, raw):
        if isinstance(raw, bool) or isinstance(raw, (list, dict)):
            hint = "; several labels per row need multi_label=True" if isinstance(raw, list) else ""
            raise ValueError(
                f"column {self.label_column!r} must hold one label (a string or number). Received: "
                f"{raw!r}{hint}"
            )
        if isinstance(raw, (int, float)):
            return str(raw)
        label = raw.strip()
        if not label:
            raise ValueError(f"column {self.label_column!r} is empty")
        return label

    def _label_strings(self, raw):
        if isinstance(raw, str):
            text = raw.strip()
            if text.startswith("[") or text.endswith("]"):
                # A list written into a CSV/TSV field (JSON, or pandas' to_csv of a list column): split
                # on the delimiter it would give classes like "['sport'" without a word.
                return self._label_strings(self._listed_labels(text))
            return [part.strip() for part in raw.split(self.label_delimiter) if part.strip()]
        if isinstance(raw, list):
            return [self._label_string(item) for item in raw]
        raise ValueError(
            f"column {self.label_column!r} must hold a list of labels or a string split on "
            f"{self.label_delimiter!r}. Received: {raw!r}"
        )

    def _listed_labels(self, text):
        """The list a field written as `["a", "b"]` (JSON) or `['a', 'b']` (a Python literal) holds."""
        try:
            listed = json.loads(text)
        except json.JSONDecodeError:
            try:
                listed = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                listed = None
        if not isinstance(listed, list):
            raise ValueError(
                f"column {self.label_column!r} holds {text[:80]!r}, which looks like a list but reads as "
                "neither JSON ([\"a\", \"b\"]) nor a Python list (['a', 'b']): write the labels as one of "
                f"those, or separated by label_delimiter={self.label_delimiter!r} without brackets"
            )
        return listed

    # -- labels ---------------------------------------------------------------

    def _encode_label(self, line, raw, report):
        if self.label_mode == "float":
            try:
                value = float(raw)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                report.fail(
                    line, f"label {raw!r} is not a finite number (label_mode='float')", kind="bad_label"
                )
                return None
            return value
        ids = []
        for label in raw if self.multi_label else [raw]:
            if self.label_mode == "index":
                try:
                    number = float(label)
                except ValueError:
                    number = math.nan
                if not math.isfinite(number) or number != int(number):
                    report.fail(
                        line,
                        f"label {label!r} is not an integer class id (label_mode='index')",
                        kind="bad_label",
                    )
                    return None
                if not 0 <= number < self._index_classes:
                    report.fail(
                        line,
                        f"label {label!r} is out of range for num_classes={self._index_classes} "
                        f"(ids 0..{self._index_classes - 1})",
                        kind="label_out_of_range",
                    )
                    return None
                ids.append(int(number))
            else:
                try:
                    ids.append(self.labels.index(label))
                except KeyError as e:
                    report.fail(line, e.args[0], kind="unknown_label")
                    return None
        if not self.multi_label:
            return ids[0]
        hot = np.zeros([self.num_classes], np.float32)
        hot[ids] = 1.0
        return hot

    # -- dataset --------------------------------------------------------------

    def _dataset(self, texts, texts_b, targets, epochs=None):
        features = {"text": tf.constant(texts, tf.string)}
        if self.text_b_column is not None:
            features["text_b"] = tf.constant(texts_b, tf.string)
        if self.multi_label:
            y = tf.constant(np.stack(targets), tf.float32)  # [N, C]
        elif self.label_mode == "float":
            y = tf.constant(targets, tf.float32)  # [N]
        else:
            y = tf.constant(targets, tf.int32)  # [N]
        preprocessor = self.preprocessor
        if self.length_buckets:
            lengths = wordpiece_lengths(
                preprocessor,
                features["text"] if "text_b" not in features else (features["text"], features["text_b"]),
            )  # [N]
            dataset = _common.length_bucketed(
                (features, y), lengths, self.batch_size, self.shuffle, self.seed, epochs
            )
        else:
            dataset = _common.batched(
                (features, y), len(texts), self.batch_size, self.shuffle, self.seed, epochs
            )
        cut = self.length_buckets

        def preprocess(features, y):
            # One call per batch: the tokenizer's ragged ops run on [B] strings at once.
            if "text_b" in features:
                x = preprocessor((features["text"], features["text_b"]))
            else:
                x = preprocessor(features["text"])
            return (cut_to_longest(x) if cut else x), y

        return _common.prefetched(dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE))


def _check_columns(text_column, label_column, text_b_column):
    for name, value in (
        ("text_column", text_column),
        ("label_column", label_column),
        ("text_b_column", text_b_column),
    ):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{name} must be a non-empty string. Received: {name}={value!r}")


def _checked_labels(label_mode, num_classes, multi_label, labels):
    """`labels` as a LabelVocabulary (or None), once the label settings are checked together."""
    if label_mode == "index":
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(
                'label_mode="index" keeps integer class ids and needs num_classes (an int >= 1) to '
                "check them. "
                f"Received: num_classes={num_classes!r}"
            )
    elif num_classes is not None:
        raise ValueError(
            f'num_classes is only used with label_mode="index"; label_mode={label_mode!r} '
            f"takes the number of classes from the labels. Received: num_classes={num_classes!r}"
        )
    if label_mode == "float" and multi_label:
        raise ValueError(
            'multi_label=True needs class labels: label_mode "vocabulary" or "index", not "float".'
        )
    if labels is not None:
        if label_mode != "vocabulary":
            raise ValueError(
                'labels= is a class-name vocabulary for label_mode="vocabulary". Received: '
                f"label_mode={label_mode!r}"
            )
        if not isinstance(labels, LabelVocabulary):
            labels = LabelVocabulary(labels)
    return labels


def _checked_column_names(header, column_names):
    """`column_names` as a list (or None), checked against `header`."""
    if column_names is None:
        return None
    if header:
        raise ValueError(
            "column_names names the columns of a headerless file: pass header=False with it. "
            f"Received: header=True, column_names={column_names!r}"
        )
    column_names = list(column_names)
    if not column_names or any(not isinstance(c, str) or not c for c in column_names):
        raise ValueError(
            f"column_names must be a list of non-empty strings. Received: column_names={column_names!r}"
        )
    if duplicate_tokens(column_names):
        raise ValueError(
            f"column_names names a column twice: name each column once (give the ones not "
            f"read any other name). Received: column_names={column_names!r}"
        )
    return column_names
