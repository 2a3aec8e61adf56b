"""The DoFn that reads one `TextShard`'s lines (imports Beam)."""

import itertools

import apache_beam as beam


class ShardReader(beam.DoFn):
    """A `TextShard` -> ((shard, line), text) for its lines (blank ones too unless
    `skip_blank`), and (shard, None) on the SHARDS output, so a shard of blank lines still
    reaches the writer."""

    SHARDS = "shards"

    def __init__(self, read_lines, skip_blank):
        self.read_lines, self.skip_blank = read_lines, skip_blank

    def process(self, shard):
        lines = itertools.islice(
            self.read_lines(shard.path, "FILE"), shard.first_line, shard.first_line + shard.lines
        )
        for number, text in enumerate(lines, shard.first_line):
            if text.strip() or not self.skip_blank:
                yield (shard.index, number), text
        yield beam.pvalue.TaggedOutput(self.SHARDS, (shard.index, None))
