"""A worker process killed in the middle of a bundle (Beam's DirectRunner, multi_processing
mode, 2 workers): nothing is lost and nothing written twice.

What the DirectRunner does, measured here: it does not retry a bundle whose worker died; the
whole pipeline fails ("Channel closed prematurely") and nothing reaches the final names.
Running the same pipeline again finishes it, resuming from the shards the failed run had
finished, and every input line is in the output exactly once, in order. (Dataflow, Flink and
Spark retry the lost bundle themselves; the keyed, atomic shard files make that retry rewrite
the same file.)"""

import functools
import json
import os

import pytest

from tests.pipelines.kill_once import KillOnce, LengthModel


@pytest.mark.slow
def test_a_killed_worker_loses_and_duplicates_nothing(tmp_path):
    from keras_bert_impl.commands.text_lines import read_lines
    from keras_bert_impl.pipelines import InferencePipeline, pipeline_options, text_shards

    lines = [f"line {i}" if i % 97 else "" for i in range(1000)]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    marker, out = tmp_path / "killed", tmp_path / "out"
    shards = text_shards([(str(source), len(lines))], 100)

    def pipeline():
        load = functools.partial(KillOnce, str(marker), LengthModel)
        return InferencePipeline(
            shards,
            read_lines,
            load,
            out,
            "predictions",
            blank_row={"text": "", "length": None},
            max_batch_size=64,
            settings={"test": 1},
        )

    options = pipeline_options("direct", 2)
    with pytest.raises(RuntimeError, match="Channel closed prematurely"):
        pipeline().run(options)
    assert marker.exists()  # a worker did die, in its first batch
    assert os.listdir(out) == [".beam-predictions"]  # nothing under a final name

    again = pipeline()
    again.run(options)
    manifest = json.loads((out / "manifest.json").read_text())
    rows = [
        json.loads(line)
        for shard in manifest["shards"]
        for line in (out / shard["file"]).read_text().splitlines()
    ]
    assert [row["text"] for row in rows] == lines  # every line once, in order
    assert [row["length"] for row in rows] == [len(t) if t else None for t in lines]
    assert sorted(os.listdir(out)) == sorted(["manifest.json"] + again.names)
