"""`kbert predict --file` and `kbert embed` with --runner direct (keras_bert_impl/pipelines/) against
the one-process commands, on MR sentences."""

import csv
import json
import os

import numpy as np
import pytest

from tests.conftest import DATA
from tests.pipelines.helpers import kbert
from tests.harness import minilm_vocab_backbone

MR = os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv")


def mr_sentences(count):
    with open(MR, encoding="utf-8-sig", newline="") as f:
        texts = [" ".join(text.split()) for _, text in csv.reader(f)]
    assert len(texts) >= count
    return texts[:count]


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory):
    """A small random classifier with the real MiniLM vocabulary (what is compared is the
    pipeline against the one-process command, not the model's quality)."""

    import keras_bert_impl as kb

    backbone = minilm_vocab_backbone(num_layers=2, hidden_dim=32, intermediate_dim=64)
    model = kb.BertClassifier(backbone, num_classes=2, label_names=["negative", "positive"])
    path = str(tmp_path_factory.mktemp("model") / "classifier.keras")
    model.save(path)
    return path


def sentences_file(folder, count):
    texts = mr_sentences(count)
    texts[3] = ""  # a blank line keeps its place: an empty result, as the one-process command gives
    path = folder / "mr.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


def read_jsonl_shards(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    rows = []
    for shard in manifest["shards"]:
        rows += [
            json.loads(line) for line in (folder / shard["file"]).read_text(encoding="utf-8").splitlines()
        ]
    return manifest, rows


def check_predictions_equal(model, texts_file, tmp_path, capsys, *runner):
    assert kbert("predict", "--model", model, "--file", texts_file, "--json", "--seq-len", 64) == 0
    expected = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    out = tmp_path / "predictions"
    assert (
        kbert("predict", "--model", model, "--file", texts_file, "--seq-len", 64, "--output", out, *runner)
        == 0
    )
    manifest, rows = read_jsonl_shards(out)
    assert manifest["lines"] == len(expected) == len(rows) and len(manifest["shards"]) > 1
    assert [r["text"] for r in rows] == [r["text"] for r in expected]
    assert [r["label"] for r in rows] == [r["label"] for r in expected]
    got = np.array([r["probability"] or 0 for r in rows])
    want = np.array([r["probability"] or 0 for r in expected])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    return rows


def check_embeddings_equal(model, texts_file, tmp_path, *runner):
    single = tmp_path / "single.npy"
    assert kbert("embed", texts_file, "--model", model, "--seq-len", 64, "--output", single) == 0
    out = tmp_path / "embeddings"
    assert kbert("embed", texts_file, "--model", model, "--seq-len", 64, "--output", out, *runner) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    vectors = np.concatenate([np.load(out / shard["file"]) for shard in manifest["shards"]])
    expected = np.load(single)
    assert vectors.shape == expected.shape
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-5)


def test_predict_on_the_direct_runner_equals_kbert_predict(tiny_classifier, tmp_path, capsys):
    texts = sentences_file(tmp_path, 300)
    rows = check_predictions_equal(
        tiny_classifier, texts, tmp_path, capsys, "--runner", "direct", "--lines-per-shard", 128
    )
    assert rows[3] == {"text": "", "label": None, "probability": None}


def test_embed_on_the_direct_runner_equals_kbert_embed(tiny_classifier, tmp_path):
    check_embeddings_equal(
        tiny_classifier,
        sentences_file(tmp_path, 300),
        tmp_path,
        "--runner",
        "direct",
        "--lines-per-shard",
        128,
    )


@pytest.mark.slow
def test_4000_mr_sentences_on_two_workers(tiny_classifier, tmp_path, capsys):
    texts = sentences_file(tmp_path, 4000)
    runner = ("--runner", "direct", "--workers", 2, "--lines-per-shard", 1000)
    check_predictions_equal(tiny_classifier, texts, tmp_path, capsys, *runner)
    check_embeddings_equal(tiny_classifier, texts, tmp_path, *runner)


def test_bad_inputs_are_one_line_before_any_worker(tiny_classifier, tmp_path, capsys):
    texts = sentences_file(tmp_path, 20)
    os.symlink("/proc/self/mem", tmp_path / "unreadable.txt")  # open() works, read() fails
    cases = [
        (["predict", "--model", tiny_classifier, "--file", tmp_path / "none-*.txt"], "matches no file"),
        (["predict", "--model", tiny_classifier, "--file", tmp_path / "unreadable.txt"], "cannot be read"),
        (["predict", "--model", tmp_path / "no-such-run", "--file", texts], "no-such-run"),
        (["embed", tmp_path / "none-*.txt", "--model", tiny_classifier], "matches no file"),
        (["embed", texts, "--model", tmp_path / "no-such-run"], "no-such-run"),
        (
            ["predict", "--model", tiny_classifier, "--file", texts, "--lines-per-shard", 0],
            "--lines-per-shard",
        ),
    ]
    for argv, message in cases:
        code = kbert(*argv, "--seq-len", 64, "--runner", "direct", "--output", tmp_path / "out")
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert not (tmp_path / "out").exists()


def test_kbert_index_builds_from_the_embedding_shards(tiny_classifier, tmp_path):
    """The shards of `kbert embed --runner direct` index to the same texts and vectors (within
    1e-5) as `kbert index` of the file itself; other flags than the shards' are refused."""
    from keras_bert_impl.inspection.vector_index import VectorIndex

    texts = sentences_file(tmp_path, 150)
    shards = tmp_path / "shards"
    assert (
        kbert(
            "embed",
            texts,
            "--model",
            tiny_classifier,
            "--seq-len",
            64,
            "--output",
            shards,
            "--runner",
            "direct",
            "--lines-per-shard",
            64,
        )
        == 0
    )
    assert (
        kbert("index", shards, "--model", tiny_classifier, "--seq-len", 64, "--output", tmp_path / "a") == 0
    )
    assert kbert("index", texts, "--model", tiny_classifier, "--seq-len", 64, "--output", tmp_path / "b") == 0
    a, b = VectorIndex.load(str(tmp_path / "a")), VectorIndex.load(str(tmp_path / "b"))
    assert a.texts == b.texts and len(a.texts) == 149
    np.testing.assert_allclose(a.vectors, b.vectors, rtol=0, atol=1e-5)
    assert (
        kbert("index", shards, "--model", tiny_classifier, "--seq-len", 32, "--output", tmp_path / "c") == 2
    )


class _BatchLog:
    """A stand-in model (no TensorFlow) that appends the size of each batch it gets to a file."""

    def __init__(self, path):
        self.path = path

    def infer(self, texts):
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(f"{len(texts)}\n")
        return [{"length": len(text)} for text in texts]


def test_run_inference_hands_the_model_full_batches(tmp_path):
    """A shard's texts reach the model in batches of max_batch_size (the last one smaller), so
    each is sorted by length and padded over many texts as in the one-process commands, not in
    the 1, 2, 4, ... texts Beam's batch estimator starts every bundle with."""
    import functools

    from keras_bert_impl.commands.text_lines import read_lines
    from keras_bert_impl.pipelines import InferencePipeline, pipeline_options, text_shards

    source, log = tmp_path / "in.txt", tmp_path / "batches.txt"
    source.write_text("".join(f"line {i}\n" for i in range(300)), encoding="utf-8")
    pipeline = InferencePipeline(
        text_shards([(str(source), 300)], 300),  # one shard: one bundle
        read_lines,
        functools.partial(_BatchLog, str(log)),
        tmp_path / "out",
        "predictions",
        blank_row={"length": None},
        max_batch_size=128,
        settings={"test": 1},
    )
    pipeline.run(pipeline_options("direct", 1))
    assert sorted(map(int, log.read_text().split()), reverse=True) == [128, 128, 44]


def test_the_direct_runner_never_starts_prism(tmp_path, monkeypatch):
    """`--runner direct` runs Beam's FnApiRunner: Beam's DirectRunner would first start the
    PrismRunner, which downloads its binary from GitHub (offline it fails and falls back), and
    nothing is downloaded at run time."""
    import apache_beam as beam
    from apache_beam.runners.portability import prism_runner

    from keras_bert_impl.pipelines import pipeline_options

    started = []
    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", lambda *a, **k: started.append(a))
    out = tmp_path / "out"
    with beam.Pipeline(options=pipeline_options("direct", 1)) as pipeline:
        _ = pipeline | beam.Create(["a", "b"]) | beam.io.WriteToText(str(out), shard_name_template="")
    assert started == [] and out.read_text().split() == ["a", "b"]
