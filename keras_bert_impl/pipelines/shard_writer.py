"""The DoFn that writes one output shard of pretraining records (imports Beam)."""

import os

import apache_beam as beam

from keras_bert_impl.pipelines.shard_files import atomic_file, write_sidecar


class ShardWriter(beam.DoFn):
    """(shard, [(order, record)]) -> that shard's TFRecord file in the staging folder, sorted by
    order, written atomically under its final name with its count beside it: a retry rewrites
    the same bytes."""

    def __init__(self, staging, names):
        self.staging, self.names = staging, names

    def process(self, element):
        import tensorflow as tf

        shard, records = element
        records = sorted(records)
        path = os.path.join(self.staging, self.names[shard])
        with atomic_file(path) as temp:
            with tf.io.TFRecordWriter(temp) as writer:
                for _, record in records:
                    writer.write(record)
        write_sidecar(path, {"examples": len(records)})
        yield shard, len(records)
