"""The DoFn that builds one corpus split's keyed pretraining examples (imports Beam)."""

import apache_beam as beam

from keras_bert_impl import file_paths
from keras_bert_impl.pipelines.shard_runs import run_name, write_run


class SplitExamples(beam.DoFn):
    """A `CorpusSplit` -> (shard, run path) for each output shard its examples go to.

    The split's examples are built through the builder's `split_instances` (keyed randomness);
    `order`, a hash of (seed, the example's key), picks each one's shard and its place in it. The
    examples of each shard are sorted by order and written as a run in `runs_dir` (shard_runs.py),
    so the worker holds one split's examples and the shard's writer merges runs as streams."""

    def __init__(self, settings, paths, format, num_shards, runs_dir):
        self.settings, self.paths, self.format, self.num_shards = settings, paths, format, num_shards
        self.runs_dir = runs_dir

    def setup(self):
        from keras_bert_impl.data import PretrainingCorpus, PretrainingExampleBuilder

        self.builder = PretrainingExampleBuilder(**self.settings)
        self.corpus = PretrainingCorpus(self.paths, format=self.format)

    def process(self, split):
        from keras_bert_impl.data.pretraining_example_builder import keyed_seed
        from keras_bert_impl.data.pretraining_features import serialize_example

        shards = {}  # shard -> [(order, serialized example)]
        for key, instance in self.builder.split_instances(self.corpus, split):
            order = keyed_seed(self.builder.seed, "shard", *key)
            record = serialize_example(self.builder.to_example(instance))
            shards.setdefault(order % self.num_shards, []).append((order, record))
        for shard, records in sorted(shards.items()):
            path = file_paths.join(self.runs_dir, run_name(shard, split))
            write_run(path, sorted(records))
            yield shard, path
