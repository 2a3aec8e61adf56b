"""Pretraining TFRecords -> tf.data batches for `BertPretrainer.fit`."""

import glob
import json
import os

import tensorflow as tf

from keras_bert_impl.data.pretraining_features import feature_spec, to_pretrainer_inputs
from keras_bert_impl.validation import check_int


class PretrainingRecordReader:
    r"""Reads records in Google's pretraining format (ours or Google's
    create_pretraining_data.py output) as `(x, y, sample_weight)` batches.

    x = {token_ids, segment_ids, padding_mask, mask_positions} (int32),
    y = {"mlm_logits": masked_lm_ids, "nsp_logits": next_sentence_labels}
    (0 = IsNext, 1 = NotNext), sample_weight = {"mlm_logits": masked_lm_weights}.

    With a `masker`, the records' own masks (if any) are ignored and fresh ones
    are drawn per batch and per epoch in the graph (`PretrainingMasker.dynamic`),
    so the records only need input_ids, input_mask, segment_ids and
    next_sentence_labels.

    Args:
        files: a path, glob pattern, or list of them.
        max_seq_length: S of the records.
        max_predictions_per_seq: P of the records (or of the dynamic masker).
        masker: a `PretrainingMasker` for dynamic masking, or None for the
            static masks stored in the records.

    Example:
    >>> from keras_bert_impl.data import PretrainingCorpus, PretrainingExampleBuilder
    >>> with open("reviews.txt", "w") as f:
    ...     _ = f.write("a long film.\nit is also funny.\nthe end drags.\n\na dull story.\nno one laughs.\n")
    >>> builder = PretrainingExampleBuilder("data/minilm/vocab.txt", max_seq_length=16, max_predictions_per_seq=4)
    >>> _ = builder.write(PretrainingCorpus("reviews.txt"), "out")
    >>> reader = PretrainingRecordReader.from_directory("out")  # lengths from out/pretraining.json
    >>> x, y, sample_weight = next(iter(reader.dataset(batch_size=8)))
    >>> {name: tuple(x[name].shape) for name in x}
    {'token_ids': (8, 16), 'segment_ids': (8, 16), 'padding_mask': (8, 16), 'mask_positions': (8, 4)}
    >>> pretrainer = kb.BertPretrainer(kb.BertBackbone.from_preset("bert_tiny"))
    >>> _ = pretrainer.fit(reader.dataset(batch_size=8, shuffle_buffer_size=100), epochs=1, verbose=0)
    """

    def __init__(self, files, max_seq_length=128, max_predictions_per_seq=20, masker=None):
        check_int("max_seq_length", max_seq_length, 5)
        check_int("max_predictions_per_seq", max_predictions_per_seq, 1)
        if masker is not None and masker.max_predictions_per_seq != max_predictions_per_seq:
            raise ValueError(
                "The masker's max_predictions_per_seq differs from the reader's. Received: "
                f"masker.max_predictions_per_seq={masker.max_predictions_per_seq}, "
                f"max_predictions_per_seq={max_predictions_per_seq}"
            )
        if isinstance(files, (str, os.PathLike)):
            files = [files]
        paths = []
        for pattern in files:
            pattern = os.fspath(pattern)
            matches = [pattern] if os.path.isfile(pattern) else sorted(glob.glob(pattern))
            if not matches:
                raise FileNotFoundError(f"No pretraining records match {pattern!r}.")
            paths.extend(matches)
        self.files = paths
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.masker = masker

    @classmethod
    def from_directory(cls, directory, prefix="pretraining", masker=None):
        """A reader for the shards `PretrainingRecordWriter` left in `directory`,
        with the lengths taken from its `<prefix>.json`."""
        path = os.path.join(os.fspath(directory), f"{prefix}.json")
        if not os.path.exists(path):
            raise FileNotFoundError(f"No {prefix}.json in {directory}: is it the output of `kbert pretrain-data`?")
        with open(path, encoding="utf-8") as f:
            metadata = json.load(f)
        if masker is None and not metadata.get("masked", True):
            raise ValueError(
                f"The records in {directory} are unmasked (written for dynamic masking): pass masker=PretrainingMasker(...)."
            )
        shards = [os.path.join(os.fspath(directory), name) for name in metadata["shards"]]
        return cls(shards, metadata["max_seq_length"], metadata["max_predictions_per_seq"], masker=masker)

    def features(self, shuffle_files=False, seed=None):
        """Unbatched parsed records: Google's names, int64 cast to int32."""
        spec = feature_spec(self.max_seq_length, self.max_predictions_per_seq, masked=self.masker is None)

        def parse(record):
            example = tf.io.parse_single_example(record, spec)
            return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}

        files = tf.data.Dataset.from_tensor_slices(self.files)
        if shuffle_files:
            files = files.shuffle(len(self.files), seed=seed, reshuffle_each_iteration=True)
        records = files.interleave(
            tf.data.TFRecordDataset, cycle_length=min(len(self.files), 8), num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return records.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    def dataset(self, batch_size=32, shuffle_buffer_size=None, seed=12345, drop_remainder=False, repeat=False):
        """Batches of `(x, y, sample_weight)` for `BertPretrainer.fit`.

        Args:
            batch_size: examples per batch.
            shuffle_buffer_size: shuffle examples (and shard order) through a
                buffer of this size, reshuffled each epoch; None keeps file order.
            seed: seed of the shuffles and of dynamic masks.
            drop_remainder: drop a last partial batch (fixed shapes for TPU/XLA).
            repeat: repeat forever (use with `steps_per_epoch`).
        """
        check_int("batch_size", batch_size, 1)
        check_int("seed", seed, 0)
        if shuffle_buffer_size is not None:
            check_int("shuffle_buffer_size", shuffle_buffer_size, 1)
        shuffle = shuffle_buffer_size is not None
        ds = self.features(shuffle_files=shuffle, seed=seed)
        if shuffle:
            ds = ds.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
        if repeat:
            ds = ds.repeat()
        ds = ds.batch(batch_size, drop_remainder=drop_remainder)
        if self.masker is not None:
            ds = self.masker.dynamic(ds, seed=seed)
        return ds.map(to_pretrainer_inputs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
