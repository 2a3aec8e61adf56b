"""The DoFn that builds one corpus split's keyed pretraining examples (imports Beam)."""

import apache_beam as beam


class SplitExamples(beam.DoFn):
    """A `CorpusSplit` -> (shard, (order, serialized example)) for each of its examples, through
    the builder's `split_instances` (keyed randomness). `order`, a hash of (seed, the example's
    key), picks the shard and the example's place in it."""

    def __init__(self, settings, paths, format, num_shards):
        self.settings, self.paths, self.format, self.num_shards = settings, paths, format, num_shards

    def setup(self):
        from keras_bert_impl.data import PretrainingCorpus, PretrainingExampleBuilder

        self.builder = PretrainingExampleBuilder(**self.settings)
        self.corpus = PretrainingCorpus(self.paths, format=self.format)

    def process(self, split):
        from keras_bert_impl.data.pretraining_example_builder import keyed_seed
        from keras_bert_impl.data.pretraining_features import serialize_example

        for key, instance in self.builder.split_instances(self.corpus, split):
            order = keyed_seed(self.builder.seed, "shard", *key)
            yield order % self.num_shards, (order, serialize_example(self.builder.to_example(instance)))
