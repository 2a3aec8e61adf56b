"""`kbert pretrain-data --runner ...`: the keyed pretraining examples built by Beam workers, one
corpus split per task, written as sharded TFRecords the one-process reader takes."""

from keras_bert_impl import file_paths
from keras_bert_impl.pipelines.shard_files import (
    atomic_file,
    read_sidecar,
    staging_folder,
    write_json,
    write_sidecar,
)
from keras_bert_impl.pipelines.pipeline_options import spread_tasks


class PretrainingPipeline:
    """Runs `PretrainingExampleBuilder(randomness="keyed")` on Apache Beam.

    Each `CorpusSplit` (a file, or `split_bytes` of a text file) goes to one worker, which reads
    it whole, tokenizes it and builds every pass's examples with the builder's own
    `split_instances`: the algorithm of the one-process command, so both give the same multiset
    of examples for the same seed, on any runner and any number of workers. Memory per worker
    is one split's tokens and examples: each split's examples of each output shard are written
    sorted as a run (shard_runs.py), which the shard's writer merges as streams.

    Each example goes to the output shard chosen by a hash of (seed, its key), and each shard
    is written sorted by that hash, so the files themselves do not depend on the runner either.
    Shards are written under their final names into a hidden staging folder of `output_dir`,
    each atomically (a retried bundle rewrites the same file), and moved into place with
    `<prefix>.json` (the settings, counts and sizes `PretrainingRecordReader.from_directory`
    checks) only after the whole pipeline succeeded, the metadata last.

    Args:
        builder_settings: `PretrainingExampleBuilder` keyword arguments (the vocabulary as a
            list of tokens); `randomness` is set to "keyed".
        paths: the input files (already expanded: `PretrainingCorpus(...).paths`).
        format: `PretrainingCorpus` format.
        output_dir: the folder of the shards, local or remote (gs://...: `keras_bert_impl.file_paths`;
            the input paths may be remote too).
        num_shards: output TFRecord files.
        overwrite: replace shards of `prefix` already in `output_dir`.
        prefix: shard names `<prefix>-00000-of-00004.tfrecord`, as `PretrainingRecordWriter`'s.
    """

    def __init__(
        self, builder_settings, paths, format, output_dir, num_shards=4, overwrite=False, prefix="pretraining"
    ):
        from keras_bert_impl.data import PretrainingRecordWriter

        self.builder_settings = dict(builder_settings, randomness="keyed")
        self.paths = list(paths)
        self.format = format
        # The writer checks num_shards, prefix and output_dir and names the files; it is never opened.
        self._names = PretrainingRecordWriter(
            output_dir, num_shards=num_shards, prefix=prefix, overwrite=overwrite
        )

    def run(self, options):
        """Runs the pipeline with Beam `options` (PipelineOptions) and puts the shards in place;
        returns (examples, shard paths, metadata path)."""
        import apache_beam as beam

        from keras_bert_impl.data import PretrainingCorpus, PretrainingExampleBuilder
        from keras_bert_impl.pipelines.shard_writer import ShardWriter
        from keras_bert_impl.pipelines.split_examples import SplitExamples

        names = self._names
        builder = PretrainingExampleBuilder(
            **self.builder_settings
        )  # checks the settings here, before any worker
        splits = PretrainingCorpus(self.paths, format=self.format).splits(builder.split_bytes)
        existing = names._existing()
        if existing and not names.overwrite:
            raise FileExistsError(
                f"{names.output_dir} already holds pretraining shards ({file_paths.basename(existing[0])}, "
                "...). Pick another output directory or prefix, or overwrite them (--overwrite)."
            )
        staging = staging_folder(names.output_dir, names.prefix)
        file_paths.remove_tree(staging)
        file_paths.makedirs(staging)
        runs = file_paths.join(staging, "runs")  # removed with the staging folder
        file_paths.makedirs(runs)
        with beam.Pipeline(options=options) as pipeline:
            _ = (
                spread_tasks(pipeline, "Splits", splits)
                | "Examples"
                >> beam.ParDo(
                    SplitExamples(self.builder_settings, self.paths, self.format, names.num_shards, runs)
                )
                | "ByShard" >> beam.GroupByKey()
                | "Write" >> beam.ParDo(ShardWriter(staging, [file_paths.basename(p) for p in names.paths]))
            )
        return self._finish(staging, builder.metadata())

    def _finish(self, staging, metadata):

        names = self._names
        counts, sizes = {}, {}
        for path in names.paths:
            name = file_paths.basename(path)
            staged = file_paths.join(staging, name)
            if not file_paths.exists(staged):
                # No example hashed to this shard (a tiny corpus): an empty file keeps the set whole
                # (an empty TFRecord file is an empty file).
                with atomic_file(staged) as temp:
                    file_paths.open_write(temp).close()
                write_sidecar(staged, {"examples": 0})
            counts[name] = read_sidecar(staged)["examples"]
            sizes[name] = file_paths.size(staged)
        if not sum(counts.values()):
            file_paths.remove_tree(staging)
            raise ValueError(
                f"The input has no text: {len(self.paths)} file(s) gave no example. Check the files and "
                f"--format ({self.format})."
            )
        stale = [p for p in names._existing() if p not in names.paths]
        for path in names.paths:
            file_paths.replace(file_paths.join(staging, file_paths.basename(path)), path)
        total = sum(counts.values())
        write_json(
            dict(metadata, examples=total, shards=list(sizes), shard_bytes=sizes),
            names.metadata_path,
            indent=2,
            sort_keys=True,
        )
        for path in stale:
            file_paths.remove(path)
        file_paths.remove_tree(staging)
        return total, list(names.paths), names.metadata_path
