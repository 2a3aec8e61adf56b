"""The DoFn that writes one output shard of pretraining records (imports Beam)."""

import os
import tempfile

import apache_beam as beam

from keras_bert_impl import file_paths
from keras_bert_impl.pipelines.shard_files import atomic_file, write_sidecar
from keras_bert_impl.pipelines.shard_runs import merged_runs


class ShardWriter(beam.DoFn):
    """(shard, [run path]) -> that shard's TFRecord file in the staging folder: its runs' records
    merged in order (shard_runs.py: one record of each run in memory), written atomically under
    its final name with its count beside it: a retry rewrites the same bytes."""

    def __init__(self, staging, names):
        self.staging, self.names = staging, names

    def process(self, element):
        import tensorflow as tf

        shard, runs = element
        count = 0
        path = file_paths.join(self.staging, self.names[shard])
        with atomic_file(path) as temp:
            # TensorFlow's writer writes local files; a remote shard is uploaded once whole.
            local = temp
            if file_paths.is_remote(temp):
                handle, local = tempfile.mkstemp(suffix=".tfrecord")
                os.close(handle)
            try:
                with tf.io.TFRecordWriter(local) as writer:
                    for _, record in merged_runs(runs):
                        writer.write(record)
                        count += 1
                if local != temp:
                    file_paths.upload(local, temp)
            finally:
                if local != temp and os.path.exists(local):
                    os.remove(local)
        write_sidecar(path, {"examples": count})
        yield shard, count
