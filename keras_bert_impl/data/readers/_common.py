"""Helpers the task readers share: decoding lines with their numbers, the
preprocessor's settings, and batching."""

import os

import tensorflow as tf

from keras_bert_impl.data.length_buckets import bucketed_batch_indices, index_dataset
from keras_bert_impl.data.readers.malformed_row_error import MalformedRowError
from keras_bert_impl.data.readers.read_report import check_on_error
from keras_bert_impl.validation import check_bool, check_int, check_positive_int

BOM = "\ufeff"


def check_file(path):
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No data file at {path!r}.")
    return path


def decoded_lines(path, report=None, skippable=False, mark_skipped=False):
    """Yields (line_number, text) for each line, newline kept, UTF-8 with an
    optional BOM. Lines are decoded one by one so that invalid bytes are
    reported with their line: as a skippable row when `skippable` (line-based
    formats), otherwise as an error for the whole file (a CSV record can span
    lines, so one line cannot be dropped without corrupting the parse). With
    `mark_skipped`, a skipped line still comes as (line_number, None): a reader
    whose records span lines drops the whole record, not one line of it."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                reason = (
                    f"not valid UTF-8 ({e.reason} at byte {e.start} of the line: "
                    f"{raw[max(0, e.start - 10) : e.end + 10]!r})"
                )
                if report is None:
                    raise MalformedRowError(
                        path, number, reason, kind="invalid_utf8", skippable=False
                    ) from None
                report.fail(number, reason, kind="invalid_utf8", skippable=skippable)
                if mark_skipped:
                    yield number, None
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
            "The preprocessor has no vocabulary. Build it as BertPreprocessor(vocab_path_or_list, "
            "sequence_length=N)."
        )
    config = preprocessor.get_config()
    return list(vocabulary), config.get("lowercase"), config.get("sequence_length")


def check_batching(batch_size, shuffle, seed):
    check_positive_int("batch_size", batch_size)
    check_bool("shuffle", shuffle)
    check_int("seed", seed, allow_none=True)


def set_reading(reader, preprocessor, batch_size, shuffle, seed, on_error):
    """Checks and sets what every task reader takes alike: its preprocessor, batching and
    what to do with a malformed row."""
    check_batching(batch_size, shuffle, seed)
    check_on_error(on_error)
    reader.preprocessor = preprocessor
    reader.batch_size = batch_size
    reader.shuffle = shuffle
    reader.seed = seed
    reader.on_error = on_error


def check_epochs(epochs):
    return check_positive_int("epochs", epochs, allow_none=True)


def batched(elements, size, batch_size, shuffle, seed, epochs=None):
    """Batches of the in-memory examples `elements` (nested arrays, first axis the example).

    epochs None: one pass, shuffled afresh each time it is iterated when `shuffle` (what
    `model.fit(dataset, epochs=N)` wants). An int: that many passes in one dataset, pass e
    ordered by a permutation drawn from (seed, e) alone. A seeded `shuffle` with
    reshuffle_each_iteration draws each pass's order from a generator held by the dataset
    object, and a dataset built afresh after a restart does not always continue it: under a
    tf.distribute strategy's fit, a resumed run trained on other batches from the next pass
    on (kbert finetune: weights 1.2e-4 apart after 20 steps). A pass's order that is a pure function of its
    number is the same in every run. Batches never straddle two passes.
    """
    if epochs is None or not shuffle or seed is None:
        dataset = tf.data.Dataset.from_tensor_slices(elements)
        if shuffle:
            dataset = dataset.shuffle(size, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size)
        return dataset if epochs is None else dataset.repeat(epochs)
    elements = tf.nest.map_structure(tf.convert_to_tensor, elements)
    seed = tf.constant(seed, tf.int64)

    def one_pass(number):
        order = tf.argsort(tf.random.stateless_uniform([size], seed=tf.stack([seed, number])))  # [N]
        return tf.data.Dataset.from_tensor_slices(order).batch(batch_size)

    indices = tf.data.Dataset.range(epochs).flat_map(one_pass)  # [B] example indices per batch
    return indices.map(lambda index: tf.nest.map_structure(lambda t: tf.gather(t, index), elements))


def length_bucketed(elements, lengths, batch_size, shuffle, seed, epochs=None):
    """Batches of the in-memory `elements` whose rows have similar `lengths` (int [N]), as
    keras_bert_impl.data.length_buckets draws them: each pass's batches a pure function of
    (seed, pass), as in `batched`, so `epochs` must be an int. Not shuffled: file order,
    batches as `batched` cuts them (a validation or prediction pass)."""
    if not shuffle:
        return batched(elements, len(lengths), batch_size, shuffle, seed, epochs)
    if epochs is None or seed is None:
        raise ValueError(
            "Shuffled length buckets need an int epochs and a seed (each pass's batches are drawn "
            f"from (seed, pass)). Received: epochs={epochs!r}, seed={seed!r}"
        )
    elements = tf.nest.map_structure(tf.convert_to_tensor, elements)
    indices = index_dataset(bucketed_batch_indices(lengths, batch_size, seed, epochs))  # [B] per batch
    return indices.map(lambda index: tf.nest.map_structure(lambda t: tf.gather(t, index), elements))


def prefetched(dataset):
    return dataset.prefetch(tf.data.AUTOTUNE)
