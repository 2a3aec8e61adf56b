"""A run of consecutive lines of one input file: the unit a batch-inference worker reads and
the output shard it writes."""

import collections

TextShard = collections.namedtuple("TextShard", ["index", "path", "first_line", "lines"])
TextShard.__doc__ = """Lines first_line .. first_line + lines - 1 (0-based) of `path`, written as
output shard `index`."""


def text_shards(line_counts, lines_per_shard):
    """[(path, line count)] -> the `TextShard`s cutting each file every `lines_per_shard` lines,
    numbered in file order."""
    shards = []
    for path, count in line_counts:
        for first in range(0, count, lines_per_shard):
            shards.append(TextShard(len(shards), path, first, min(lines_per_shard, count - first)))
    return shards
