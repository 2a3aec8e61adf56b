"""Sharded, atomic TFRecord output of pretraining examples."""

import contextlib
import json
import os
import random
import re

import tensorflow as tf

from keras_bert_impl.data.pretraining_features import serialize_example
from keras_bert_impl.validation import check_int


class PretrainingRecordWriter:
    """Writes examples as tf.train.Example records with Google's feature names,
    spread over `num_shards` files, shuffled through a bounded buffer.

    Google shuffles all instances in memory before writing; here a buffer of
    `shuffle_buffer_size` serialized records plays that role (each incoming
    record replaces a random buffered one, which is written out), so memory
    stays bounded. Records then go round-robin to the shards, as Google's
    writer does with several output files.

    Nothing appears under the final names until `close()` succeeds: shards are
    written as `.tmp-<name>` in `output_dir` and renamed into place at the end,
    together with `<prefix>.json` (counts, each shard's size, and the settings
    given as `metadata`), renamed last: a crash between two renames leaves
    shards whose sizes the old `<prefix>.json` does not list, which
    `PretrainingRecordReader.from_directory` refuses. If writing fails (a full
    disk included: an OSError naming the shard), the temporary files are
    removed. Existing
    shards of the same prefix are an error unless `overwrite=True`, in which
    case they are replaced (stale shards of another shard count are removed
    after the new ones are in place, so a glob never mixes two runs).

    Args:
        output_dir: directory for the shards (created if needed).
        num_shards: number of output files (>= 1).
        prefix: shard names are `<prefix>-00000-of-00004.tfrecord`.
        shuffle_buffer_size: records held for shuffling (1 = keep order).
        seed: seed of the shuffle.
        overwrite: replace existing shards of this prefix.
        metadata: dict stored in `<prefix>.json`.

    Example:
    >>> # One padded example under Google's names; PretrainingExampleBuilder.examples makes them.
    >>> example = {"input_ids": [101, 2204, 2143, 102], "input_mask": [1, 1, 1, 1],
    ...            "segment_ids": [0, 0, 0, 0], "next_sentence_labels": [0]}
    >>> with PretrainingRecordWriter("out", num_shards=2) as writer:
    ...     for _ in range(3):
    ...         writer.write(example)
    >>> writer.paths, writer.count
    (['out/pretraining-00000-of-00002.tfrecord', 'out/pretraining-00001-of-00002.tfrecord'], 3)
    """

    def __init__(
        self,
        output_dir,
        num_shards=4,
        prefix="pretraining",
        shuffle_buffer_size=10000,
        seed=12345,
        overwrite=False,
        metadata=None,
    ):
        check_int("num_shards", num_shards, 1)
        check_int("shuffle_buffer_size", shuffle_buffer_size, 1)
        check_int("seed", seed, 0)
        if not prefix or os.sep in prefix or prefix.startswith("."):
            raise ValueError(f"prefix must be a plain file-name prefix. Received: prefix={prefix!r}")
        output_dir = os.fspath(output_dir)
        if os.path.exists(output_dir) and not os.path.isdir(output_dir):
            raise ValueError(f"output_dir exists and is not a directory. Received: output_dir={output_dir!r}")
        self.output_dir = output_dir
        self.num_shards = num_shards
        self.prefix = prefix
        self.shuffle_buffer_size = shuffle_buffer_size
        self.seed = seed
        self.overwrite = overwrite
        self.metadata = dict(metadata or {})
        self.paths = [
            os.path.join(output_dir, f"{prefix}-{i:05d}-of-{num_shards:05d}.tfrecord")
            for i in range(num_shards)
        ]
        self.metadata_path = os.path.join(output_dir, f"{prefix}.json")
        self.count = 0
        self._writers = None

    def _existing(self):
        # Exactly this prefix's names: a glob `prefix-*-of-*` also matched `prefix-val-...`, whose
        # shards an overwrite then deleted as stale.
        name = re.compile(rf"{re.escape(self.prefix)}-\d{{5}}-of-\d{{5}}\.tfrecord")
        from keras_bert_impl import file_paths  # the Beam pipeline writes into remote folders too

        return sorted(
            file_paths.join(self.output_dir, entry)
            for entry in file_paths.listdir(self.output_dir)
            if name.fullmatch(entry)
        )

    def open(self):
        existing = self._existing()
        if existing and not self.overwrite:
            raise FileExistsError(
                f"{self.output_dir} already holds pretraining shards ({os.path.basename(existing[0])}, ...). "
                "Pick another output directory or prefix, or overwrite them (--overwrite)."
            )
        os.makedirs(self.output_dir, exist_ok=True)
        self._temps = [self._temp(p) for p in self.paths] + [self._temp(self.metadata_path)]
        self._writers = [tf.io.TFRecordWriter(t) for t in self._temps[:-1]]
        self._buffer = []
        self._rng = random.Random(self.seed)
        self._next_shard = 0
        self.count = 0
        return self

    @staticmethod
    def _temp(path):
        return os.path.join(os.path.dirname(path), ".tmp-" + os.path.basename(path))

    def write(self, example):
        """Adds one example (a dict of lists under Google's names)."""
        if self._writers is None:
            raise RuntimeError(
                "PretrainingRecordWriter is not open: use `with PretrainingRecordWriter(...) as w:`."
            )
        record = serialize_example(example)
        self.count += 1
        if len(self._buffer) < self.shuffle_buffer_size:
            self._buffer.append(record)
            return
        j = self._rng.randrange(self.shuffle_buffer_size)
        self._emit(self._buffer[j])
        self._buffer[j] = record

    def _emit(self, record):
        with self._disk_errors(self._next_shard):
            self._writers[self._next_shard].write(record)
        self._next_shard = (self._next_shard + 1) % self.num_shards

    @contextlib.contextmanager
    def _disk_errors(self, shard):
        """TensorFlow's file errors (a full disk is a ResourceExhaustedError, not an OSError) as
        an OSError naming the shard."""
        try:
            yield
        except tf.errors.OpError as e:
            raise OSError(
                f"Writing {self.paths[shard]} failed: {e.message}. Free some space, or write to another "
                "output directory."
            ) from None

    def close(self):
        """Flushes the buffer and moves the shards and metadata into place (the metadata
        last); on any failure the temporary files are removed and the error raised."""
        if self._writers is None:
            return
        try:
            self._rng.shuffle(self._buffer)
            for record in self._buffer:
                self._emit(record)
            self._buffer = []
            for shard, writer in enumerate(self._writers):
                with self._disk_errors(shard):
                    writer.close()
            self._writers = None
            stale = [p for p in self._existing() if p not in self.paths]
            metadata = dict(
                self.metadata,
                examples=self.count,
                shards=[os.path.basename(p) for p in self.paths],
                shard_bytes={
                    os.path.basename(p): os.path.getsize(t) for p, t in zip(self.paths, self._temps)
                },
            )
            with open(self._temps[-1], "w", encoding="utf-8") as f:
                json.dump(metadata, f, indent=2, sort_keys=True)
            for temp, path in zip(self._temps, self.paths + [self.metadata_path]):
                os.replace(temp, path)
        except BaseException:
            self.abort()
            raise
        for path in stale:
            os.remove(path)

    def abort(self):
        """Drops everything written so far; the final names are untouched. Never raises: a
        writer that cannot close (a full disk) must not keep its temporary file in place."""
        for writer in self._writers or []:
            with contextlib.suppress(Exception):
                writer.close()
        self._writers = None
        for temp in getattr(self, "_temps", []):
            with contextlib.suppress(OSError):
                os.remove(temp)

    def __enter__(self):
        return self.open()

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False
