"""Helpers the task readers share: decoding lines with their numbers, the
preprocessor's settings, and batching."""

import os

import tensorflow as tf

from keras_bert_impl.data.readers.malformed_row_error import MalformedRowError
from keras_bert_impl.validation import check_bool, check_int, check_positive_int

BOM = "\ufeff"


def check_file(path):
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No data file at {path!r}.")
    return path


def decoded_lines(path, report=None, skippable=False):
    """Yields (line_number, text) for each line, newline kept, UTF-8 with an
    optional BOM. Lines are decoded one by one so that invalid bytes are
    reported with their line: as a skippable row when `skippable` (line-based
    formats), otherwise as an error for the whole file (a CSV record can span
    lines, so one line cannot be dropped without corrupting the parse)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                reason = f"not valid UTF-8 ({e.reason} at byte {e.start} of the line: {raw[max(0, e.start - 10):e.end + 10]!r})"
                if report is None:
                    raise MalformedRowError(path, number, reason, kind="invalid_utf8", skippable=False) from None
                report.fail(number, reason, kind="invalid_utf8", skippable=skippable)
                continue
            if number == 1 and text.startswith(BOM):
                text = text[1:]
            yield number, text


def preprocessor_settings(preprocessor):
    """(vocabulary, lowercase, sequence_length) of a BertPreprocessor, via its
    public surface (the vocabulary and get_config)."""
    vocabulary = getattr(preprocessor, "vocabulary", None)
    if vocabulary is None:
        raise ValueError(
            "The preprocessor has no vocabulary. Build it as BertPreprocessor(vocab_path_or_list, sequence_length=N)."
        )
    config = preprocessor.get_config()
    return list(vocabulary), config.get("lowercase"), config.get("sequence_length")


def check_batching(batch_size, shuffle, seed):
    check_positive_int("batch_size", batch_size)
    check_bool("shuffle", shuffle)
    check_int("seed", seed, allow_none=True)


def batched(dataset, size, batch_size, shuffle, seed):
    """Shuffles the whole (in-memory) set when asked, then batches."""
    if shuffle:
        dataset = dataset.shuffle(size, seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size)


def prefetched(dataset):
    return dataset.prefetch(tf.data.AUTOTUNE)
