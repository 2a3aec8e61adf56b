"""Sorted runs: one corpus split's records of one output shard, in shard order, as a file.

A split's examples are sorted and written per shard by the worker that built them (it holds one
split's examples, never more), and a shard's writer merges its runs as streams, so no worker holds
a shard's records: memory per worker is bounded by the split, whatever the corpus' size. A run
is a sequence of records, each an 8-byte big-endian order (a 64-bit hash), a 4-byte length and
the serialized example. Paths may be local or remote (keras_bert_impl.file_paths).
"""

import heapq
import struct

from keras_bert_impl import file_paths
from keras_bert_impl.pipelines.shard_files import atomic_file

_HEAD = struct.Struct(">QI")  # order, record length


def run_name(shard, split):
    """The file name of `split`'s run for `shard`: one per (shard, split), so a retried split
    rewrites its own files and no other's."""
    return f"{shard:05d}-{split.file_index:06d}-{split.start:015d}.run"


def write_run(path, records):
    """Writes `records`, a list of (order, bytes) in ascending order, as the run `path`, atomically."""
    with atomic_file(path) as temp:
        with file_paths.open_write(temp) as f:
            for order, record in records:
                f.write(_HEAD.pack(order, len(record)))
                f.write(record)


def read_run(path):
    """Yields the (order, bytes) records of the run `path`, in its order."""
    with file_paths.open_read(path) as f:
        while head := _read_exactly(f, _HEAD.size, path):
            order, length = _HEAD.unpack(head)
            yield order, _read_exactly(f, length, path, inside=True)


def _read_exactly(f, size, path, inside=False):
    """`size` bytes of `f` (b"" at the end of a run between records)."""
    data = f.read(size)
    while len(data) < size:
        more = f.read(size - len(data))
        if not more:
            if data or inside:
                raise ValueError(f"{path}: the run ends inside a record: the file was cut short.")
            return b""
        data += more
    return data


def merged_runs(paths):
    """The records of the runs at `paths` as one stream in (order, bytes) order: the order
    sorting them all would give, with one record of each run in memory."""
    return heapq.merge(*(read_run(path) for path in sorted(paths)))
