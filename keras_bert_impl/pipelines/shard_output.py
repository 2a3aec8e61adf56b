"""The DoFn that writes one output shard of batch inference (imports Beam)."""

import json

import apache_beam as beam

from keras_bert_impl import file_paths
from keras_bert_impl.pipelines.shard_files import atomic_file, write_sidecar


class ShardOutput(beam.DoFn):
    """(shard, [(line, row)] and a None) -> the shard's file in the staging folder, one row per
    input line in order (`blank_row` where the reader kept a blank line from the model), written
    atomically under a name that is the shard's key: a retried bundle replaces the file, never
    adds to it."""

    def __init__(self, shards, names, staging, kind, blank_row):
        self.shards, self.names, self.staging, self.kind, self.blank_row = (
            shards,
            names,
            staging,
            kind,
            blank_row,
        )

    def process(self, element):
        import numpy as np

        index, items = element
        shard = self.shards[index]
        results = dict(item for item in items if item is not None)
        lines = range(shard.first_line, shard.first_line + shard.lines)
        rows = [results[line] if line in results else self.blank_row for line in lines]
        if any(row is None for row in rows):  # a line lost between reader and writer: never write a gap
            raise RuntimeError(
                f"shard {index}: {sum(r is None for r in rows)} line(s) came back without a result"
            )
        path = file_paths.join(self.staging, self.names[index])
        with atomic_file(path) as temp, file_paths.open_write(temp) as f:
            if self.kind == "embeddings":
                np.save(f, np.asarray(rows, np.float32).reshape(len(rows), -1))
            else:
                f.writelines((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8") for row in rows)
        write_sidecar(path, {"texts": len(results)})
        yield index, len(rows)
