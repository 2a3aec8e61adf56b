"""`kbert predict --model RUN` on LiteRT, a second time: the run folder's kept route (the .tflite
file the first process converted, its vocabulary and labels) runs on keras_bert_lite in a process
that never imports TensorFlow, and gives the rows and the notes the first process gave; anything
the route was not made from (another --seq-len, a changed model or task.json, a removed or
damaged file, the cache turned off) takes the TensorFlow path again (the tiny MR classifier of
tests/commands/conftest.py)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from keras_bert_impl.cli import build_parser, main
from keras_bert_impl.commands.lite_route import ROUTES, LiteRoute
from tests.commands.without_tensorflow import kbert_child
from tests.conftest import REPO
from tests.tokenization.references import corpus

TEXTS = corpus("mr")[:24]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("KBERT_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(scope="module")
def run_copy(tiny_run, tmp_path_factory):
    """A copy of the tiny run, whose files the tests below change."""
    return str(shutil.copytree(tiny_run, tmp_path_factory.mktemp("route") / "run"))


def _predict(capsys, *argv):
    capsys.readouterr()
    status = main(["predict", "--json", *argv])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return [json.loads(line) for line in captured.out.splitlines()], captured.err


def _route(*argv):
    return LiteRoute.find(build_parser().parse_args(["predict", *argv]))


def _child(*argv):
    done = subprocess.run(
        [sys.executable, "-c", kbert_child("predict"), "--json", *argv],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "export")])),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    *rows, modules = done.stdout.splitlines()
    return [json.loads(row) for row in rows], done.stderr, modules


@pytest.mark.parametrize("flags", [["--runtime", "litert"], ["--precision", "int8"]])
def test_the_second_process_runs_the_kept_file_without_tensorflow(run_copy, cache, capsys, flags):
    argv = ["--model", run_copy, *flags, *TEXTS]
    assert _route(*argv) is None
    first, said = _predict(capsys, *argv)
    assert _route(*argv) is not None and len(os.listdir(cache / ROUTES)) == 1
    rows, stderr, modules = _child(*argv)
    assert (
        modules == "heavy []" and stderr == said
    )  # the resolver's note (int8 here on a CPU without VNNI) again
    assert [r["label"] for r in rows] == [r["label"] for r in first] and [r["text"] for r in rows] == TEXTS
    assert max(abs(a["probability"] - b["probability"]) for a, b in zip(rows, first)) <= 1e-6
    # In the same process too (a Python user's cli.main), from the same route.
    again, said_again = _predict(capsys, *argv)
    assert again == rows and said_again == said


def test_what_the_route_was_not_made_from_takes_the_tensorflow_path(run_copy, cache, capsys, monkeypatch):
    argv = ["--model", run_copy, "--runtime", "litert", TEXTS[0]]
    _predict(capsys, *argv)
    assert _route(*argv) is not None
    for other in (["--seq-len", "16"], ["--precision", "int8"], ["--batch-size", "4"]):
        found = _route(*argv, *other)
        assert (found is not None) == (other[0] == "--batch-size"), other  # batching is not in the key
    monkeypatch.setenv("KBERT_CACHE_DIR", "off")
    assert _route(*argv) is None
    monkeypatch.setenv("KBERT_CACHE_DIR", str(cache))
    # The file the route names: damaged (its bytes no longer match the digest in its name), removed.
    (path,) = _route(*argv).manifest()["files"].values()
    content = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(content[:-1] + bytes([content[-1] ^ 1]))
    assert _route(*argv) is None
    os.remove(path)
    assert _route(*argv) is None
    # A route whose file the cache's size cap removed is removed when the next route is kept.
    dead = cache / ROUTES / "dead"
    dead.mkdir()
    (dead / "export.json").write_text(json.dumps({"files": {"tflite_float32": str(cache / "gone.tflite")}}))
    _predict(capsys, *argv)  # the TensorFlow path converts it again and keeps the route again
    assert _route(*argv) is not None and not dead.exists()
    # A changed task.json (its label names), a changed model.keras.
    task = os.path.join(run_copy, "task.json")
    stored = json.load(open(task))
    json.dump({**stored, "label_names": ["neg", "pos"]}, open(task, "w"))
    assert _route(*argv) is None
    json.dump(stored, open(task, "w"), indent=2, sort_keys=True)
    with open(os.path.join(run_copy, "model.keras"), "ab") as f:
        f.write(b"\0")
    assert _route(*argv) is None


def test_only_a_classifier_on_litert_keeps_a_route(tiny_run, cache, capsys):
    _predict(capsys, "--model", tiny_run, TEXTS[0])  # fp32 on TensorFlow: nothing converted
    _predict(capsys, "--model", tiny_run, "--precision", "bf16", TEXTS[0])
    assert not (cache / ROUTES).exists()
