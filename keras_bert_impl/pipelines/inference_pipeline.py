"""Batch prediction and embedding on Apache Beam: `kbert predict --file` and `kbert embed` with
--runner, through Beam's RunInference."""

import hashlib
import json
import os
import re

from keras_bert_impl import file_paths
from keras_bert_impl.pipelines.shard_files import read_sidecar, staging_folder, write_json
from keras_bert_impl.pipelines.pipeline_options import spread_tasks


class InferencePipeline:
    """Runs a text model over sharded text files with Beam's `RunInference`, one output file
    per input shard, rows in input order.

    Each `TextShard` (a run of lines of one file) is read by a worker; its non-blank lines, keyed
    by (shard, line), go through `RunInference` with `TextModelHandler`, whose model is what
    `load()` returns on the worker (the same `TextPredictor` or `SentenceEncoder` the one-process
    commands build, so the numbers are theirs: each batch is sorted by length and padded to its
    longest row, as those classes do); the results are grouped by shard, put back in line order
    and written by `ShardOutput`. Every shard's file is named by its key and written atomically
    into a staging folder, so a bundle the runner retries rewrites the same file: nothing is
    written twice. The files move into `output_dir` with `manifest.json` (inputs, shards, counts)
    only when the whole pipeline succeeded.

    A run that fails part way (a worker killed: Beam's DirectRunner then fails the whole
    pipeline rather than retry the bundle; Dataflow, Flink and Spark retry it) leaves its
    finished shards in the staging folder; running the same pipeline again (the same shards,
    kind and `settings`) runs only the shards not finished, so a re-run neither loses nor
    repeats a line.

    Args:
        shards: the `TextShard`s (`text_shards`), every line of the input.
        read_lines: function (path, name) -> iterator over a file's lines, as the one-process
            command reads them (it runs on the workers).
        load: function () -> the loaded model on a worker: an object whose `infer(texts)` gives
            the output file's row of each text (a JSON-able dict for predictions, a vector for
            embeddings).
        output_dir: the folder of the shards and manifest.json, local or remote (gs://...:
            `keras_bert_impl.file_paths`); the inputs may be remote too.
        kind: "predictions" (JSON lines) or "embeddings" (.npy float32 [lines, dim]).
        blank_row: the row of a blank line, which then skips the model; None sends blank
            lines through it too (embeddings: the vector of an empty text, as `kbert embed`).
        max_batch_size: most texts in one RunInference batch (the model sorts each by length).
        settings: a JSON-able dict of what else decides the outputs (the model and its flags):
            a staging folder left by a run with other settings is discarded, not resumed.
    """

    KINDS = {"predictions": ".jsonl", "embeddings": ".npy"}

    def __init__(
        self, shards, read_lines, load, output_dir, kind, blank_row=None, max_batch_size=1024, settings=None
    ):
        if kind not in self.KINDS:
            raise ValueError(f"kind must be one of {list(self.KINDS)}. Received: kind={kind!r}")
        self.shards = list(shards)
        self.read_lines = read_lines
        self.load = load
        self.output_dir = os.fspath(output_dir)
        self.kind = kind
        self.blank_row = blank_row
        self.max_batch_size = max_batch_size
        self.settings = dict(settings or {})
        count = len(self.shards)
        self.names = [f"{kind}-{s.index:05d}-of-{count:05d}{self.KINDS[kind]}" for s in self.shards]

    def run(self, options):
        """Runs the pipeline with Beam `options`; returns the path of manifest.json."""
        import apache_beam as beam
        from apache_beam.ml.inference.base import KeyedModelHandler, RunInference

        from keras_bert_impl.pipelines.shard_output import ShardOutput
        from keras_bert_impl.pipelines.shard_reader import ShardReader
        from keras_bert_impl.pipelines.text_model_handler import TextModelHandler

        staging = staging_folder(self.output_dir, self.kind)
        todo = self._unfinished(staging)
        self.resumed = len(self.shards) - len(todo)
        if not todo:
            return self._finish(staging)
        handler = KeyedModelHandler(TextModelHandler(self.load, self.max_batch_size))
        with beam.Pipeline(options=options) as pipeline:
            read = spread_tasks(pipeline, "Shards", todo) | "Read" >> beam.ParDo(
                ShardReader(self.read_lines, self.blank_row is not None)
            ).with_outputs(ShardReader.SHARDS, main="texts")
            results = (
                read.texts
                | "Infer" >> RunInference(handler)
                | "ByShard" >> beam.Map(lambda kv: (kv[0][0], (kv[0][1], kv[1].inference)))
            )
            _ = (
                (results, read[ShardReader.SHARDS])
                | beam.Flatten()
                | "Gather" >> beam.GroupByKey()
                | "Write"
                >> beam.ParDo(ShardOutput(self.shards, self.names, staging, self.kind, self.blank_row))
            )
        return self._finish(staging)

    def _fingerprint(self):
        described = {
            "kind": self.kind,
            "blank_row": self.blank_row,
            "settings": self.settings,
            "shards": [[s.index, file_paths.absolute(s.path), s.first_line, s.lines] for s in self.shards],
        }
        return hashlib.sha256(json.dumps(described, sort_keys=True).encode("utf-8")).hexdigest()

    def _unfinished(self, staging):
        """The shards a run still has to write: all of them unless the staging folder was left
        by a run of this very pipeline, whose finished shards (their count file is written
        last) are kept."""
        stamp = file_paths.join(staging, "pipeline.sha256")
        fingerprint = self._fingerprint()
        if not file_paths.exists(stamp) or file_paths.read_text(stamp) != fingerprint:
            file_paths.remove_tree(staging)
            file_paths.makedirs(staging)
            file_paths.write_text(stamp, fingerprint)
            return list(self.shards)
        return [
            s
            for s, name in zip(self.shards, self.names)
            if not file_paths.exists(file_paths.join(staging, name + ".json"))
        ]

    def _finish(self, staging):
        file_paths.makedirs(self.output_dir)
        shards = []
        for shard, name in zip(self.shards, self.names):
            staged = file_paths.join(staging, name)
            written = read_sidecar(staged)
            shards.append(
                {
                    "file": name,
                    "input": file_paths.absolute(shard.path),
                    "first_line": shard.first_line + 1,
                    "lines": shard.lines,
                    "texts": written["texts"],
                }
            )
        stale = [
            n
            for n in file_paths.listdir(self.output_dir)
            if re.fullmatch(rf"{self.kind}-\d{{5}}-of-\d{{5}}{re.escape(self.KINDS[self.kind])}", n)
            and n not in self.names
        ]
        for name in self.names:
            file_paths.replace(file_paths.join(staging, name), file_paths.join(self.output_dir, name))
        manifest = file_paths.join(self.output_dir, "manifest.json")
        write_json(
            {
                "kind": self.kind,
                "lines": sum(s.lines for s in self.shards),
                "shards": shards,
                "settings": self.settings,
            },
            manifest,
            indent=2,
        )
        for name in stale:  # a run with --overwrite and with fewer shards: no file of the old run stays
            file_paths.remove(file_paths.join(self.output_dir, name))
        file_paths.remove_tree(staging)
        return manifest


def read_manifest(output_dir):
    """The shards a finished `InferencePipeline` wrote: manifest.json's dict."""
    return json.loads(file_paths.read_text(file_paths.join(output_dir, "manifest.json")))
