"""Pretraining TFRecords -> tf.data batches for `BertPretrainer.fit`."""

import glob
import json
import os

import tensorflow as tf

from keras_bert_impl.data.pretraining_features import MASK_FEATURES, feature_spec, to_pretrainer_inputs
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH, check_int


class PretrainingRecordReader:
    r"""Reads records in Google's pretraining format (ours or Google's
    create_pretraining_data.py output) as `(x, y, sample_weight)` batches.

    x = {token_ids, segment_ids, padding_mask, mask_positions} (int32),
    y = {"mlm_logits": masked_lm_ids, "nsp_logits": next_sentence_labels}
    (0 = IsNext, 1 = NotNext), sample_weight = {"mlm_logits": masked_lm_weights}.

    With a `masker`, the records' own masks (if any) are undone (each masked
    position gets its original token back from masked_lm_ids) and fresh ones
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
    >>> builder = PretrainingExampleBuilder("data/minilm/vocab.txt", max_seq_length=16,
    ...                                     max_predictions_per_seq=4)
    >>> _ = builder.write(PretrainingCorpus("reviews.txt"), "out")
    >>> reader = PretrainingRecordReader.from_directory("out")  # lengths from out/pretraining.json
    >>> x, y, sample_weight = next(iter(reader.dataset(batch_size=8)))
    >>> {name: tuple(x[name].shape) for name in x}
    {'token_ids': (8, 16), 'segment_ids': (8, 16), 'padding_mask': (8, 16), 'mask_positions': (8, 4)}
    >>> pretrainer = kb.BertPretrainer(kb.BertBackbone.from_preset("bert_tiny"))
    >>> _ = pretrainer.fit(reader.dataset(batch_size=8, shuffle_buffer_size=100), epochs=1, verbose=0)
    """

    def __init__(
        self, files, max_seq_length=DEFAULT_SEQUENCE_LENGTH, max_predictions_per_seq=20, masker=None
    ):
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
    def from_directory(
        cls,
        directory,
        prefix="pretraining",
        masker=None,
        remedy="Write the records again (kbert pretrain-data --overwrite).",
    ):
        """A reader for the shards `PretrainingRecordWriter` left in `directory`,
        with the lengths taken from its `<prefix>.json`. `remedy`: the sentence that ends the
        error for shards that do not match the metadata (what the user runs to write them anew)."""
        path = os.path.join(os.fspath(directory), f"{prefix}.json")
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"No {prefix}.json in {directory}: is it the output of `kbert pretrain-data`?"
            )
        with open(path, encoding="utf-8") as f:
            metadata = json.load(f)
        if masker is None and not metadata.get("masked", True):
            raise ValueError(
                f"The records in {directory} are unmasked (written for dynamic masking): pass "
                "masker=PretrainingMasker(...)."
            )
        shards = [os.path.join(os.fspath(directory), name) for name in metadata["shards"]]
        # The writer renames the shards, then the metadata: a write killed between two renames
        # leaves shards of two runs under an older metadata, whose sizes tell them apart.
        for name, size in (metadata.get("shard_bytes") or {}).items():
            shard = os.path.join(os.fspath(directory), name)
            found = os.path.getsize(shard) if os.path.isfile(shard) else None
            if found != size:
                raise ValueError(
                    f"{shard} {'is missing' if found is None else f'holds {found} bytes'}, but {path} lists "
                    f"{size}: the shards and their metadata come from different writes (one interrupted). "
                    f"{remedy}"
                )
        return cls(shards, metadata["max_seq_length"], metadata["max_predictions_per_seq"], masker=masker)

    def features(self, shuffle_files=False, seed=None):
        """Unbatched parsed records: Google's names, int64 cast to int32. With a masker, the
        unmasked features (statically masked records' masks undone, `_unmask`)."""
        files = tf.data.Dataset.from_tensor_slices(self.files)
        if shuffle_files:
            files = files.shuffle(len(self.files), seed=seed, reshuffle_each_iteration=True)
        return self._parsed(files)

    def _parsed(self, files):
        """The records of a dataset of file names, parsed (`features`)."""
        spec = feature_spec(self.max_seq_length, self.max_predictions_per_seq)
        if self.masker is not None:
            # Records written for dynamic masking have no mask features: zero weights, nothing to undo.
            zeros = [0] * self.max_predictions_per_seq
            spec = {
                name: tf.io.FixedLenFeature(
                    f.shape, f.dtype, default_value=zeros if name in MASK_FEATURES else None
                )
                for name, f in spec.items()
            }

        def parse(record):
            example = tf.io.parse_single_example(record, spec)
            if self.masker is not None:
                example = _unmask(example)
            return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}

        records = files.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(len(self.files), 8),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return records.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    def dataset(
        self,
        batch_size=32,
        shuffle_buffer_size=None,
        seed=12345,
        drop_remainder=False,
        repeat=False,
        passes=None,
    ):
        """Batches of `(x, y, sample_weight)` for `BertPretrainer.fit`.

        Args:
            batch_size: examples per batch.
            shuffle_buffer_size: shuffle examples (and shard order) through a
                buffer of this size, reshuffled each epoch; None keeps file order.
            seed: seed of the shuffles and of dynamic masks.
            drop_remainder: drop a last partial batch (fixed shapes for TPU/XLA).
            repeat: repeat forever (use with `steps_per_epoch`).
            passes: an int: that many passes over the records in one dataset, pass e's
                order and dynamic masks drawn from (seed, e) alone (stateless draws; the
                shuffle permutes the shard order, then each window of
                `shuffle_buffer_size` records), so a dataset built afresh and skipped to
                batch k gives the batch k of an uninterrupted one (what `fit_resumable`
                needs). A seeded shuffle reshuffled each iteration draws from a generator
                that every iterator made over the dataset advances: a resumed `kbert
                pretrain` trained on another pass's order, some rows twice and others
                never. Batches never straddle two passes. None: one pass (see `repeat`).
        """
        check_int("batch_size", batch_size, 1)
        check_int("seed", seed, 0)
        if shuffle_buffer_size is not None:
            check_int("shuffle_buffer_size", shuffle_buffer_size, 1)
        if passes is not None:
            check_int("passes", passes, 1)
            if repeat:
                raise ValueError(f"Give repeat or passes, not both. Received: repeat=True, passes={passes}")
            return self._passes(batch_size, shuffle_buffer_size, seed, drop_remainder, passes)
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

    def _passes(self, batch_size, shuffle_buffer_size, seed, drop_remainder, passes):
        """`dataset(passes=...)`: each pass built inside `flat_map` from its own stateless seeds.
        Its shuffle is stateless too: the shard order, then the records of each window of
        `shuffle_buffer_size` permuted (Dataset.shuffle takes no tensor seed under a global
        seed of 0: its `seeds == (0, 0)` check). The writer shuffled the records already, and
        shards interleave."""
        seed = tf.constant(seed, tf.int64)
        files = tf.constant(self.files)

        def draw_seed(number, purpose):  # an int64 of (seed, pass, purpose: 0 shards, 1 windows, 2 masks)
            return tf.random.stateless_uniform(
                [], seed=tf.stack([seed, 3 * number + purpose]), minval=0, maxval=tf.int64.max, dtype=tf.int64
            )

        def permuted(elements, size, key):  # elements [N, ...] in an order drawn from the seed `key` [2]
            order = tf.argsort(tf.random.stateless_uniform([size], seed=key))
            return tf.nest.map_structure(lambda t: tf.gather(t, order), elements)

        def one_pass(number):
            if shuffle_buffer_size is None:
                ds = self._parsed(tf.data.Dataset.from_tensor_slices(files))
            else:
                order = permuted(files, len(self.files), tf.stack([draw_seed(number, 0), 0]))
                windows = self._parsed(tf.data.Dataset.from_tensor_slices(order)).batch(shuffle_buffer_size)
                window_seed = draw_seed(number, 1)
                ds = windows.enumerate().flat_map(
                    lambda index, window: tf.data.Dataset.from_tensor_slices(
                        permuted(window, tf.shape(window["input_ids"])[0], tf.stack([window_seed, index]))
                    )
                )
            ds = ds.batch(batch_size, drop_remainder=drop_remainder)
            if self.masker is not None:
                mask_seed = draw_seed(number, 2)
                ds = ds.enumerate().map(
                    lambda index, features: self.masker.mask_batch(features, tf.stack([mask_seed, index])),
                    num_parallel_calls=tf.data.AUTOTUNE,
                    deterministic=True,
                )
            return ds

        ds = tf.data.Dataset.range(passes).flat_map(one_pass)
        return ds.map(to_pretrainer_inputs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _unmask(example):
    """A statically masked record's features with its original tokens back at the masked
    positions (input_ids [S] <- masked_lm_ids [P] where masked_lm_weights > 0) and no mask
    features: what a dynamic masker starts from. Unused slots (weight 0) change nothing."""
    real = example["masked_lm_weights"] > 0  # [P]
    positions = tf.boolean_mask(example["masked_lm_positions"], real)
    originals = tf.boolean_mask(example["masked_lm_ids"], real)
    unmasked = {k: v for k, v in example.items() if k not in MASK_FEATURES}
    unmasked["input_ids"] = tf.tensor_scatter_nd_update(example["input_ids"], positions[:, None], originals)
    return unmasked
