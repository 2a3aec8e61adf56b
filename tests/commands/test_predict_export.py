"""`kbert predict --model EXPORT`: a classifier's `kbert export --formats tflite` folder run by
keras_bert_lite on LiteRT, in a process that never imports TensorFlow or Keras, giving the rows the
run folder gives (the tiny MR classifier of tests/commands/conftest.py)."""

import json
import os
import subprocess
import sys

import pytest

from keras_bert_impl.cli import main
from tests.conftest import REPO
from tests.tokenization.references import corpus

TEXTS = corpus("mr")[:40]
KBERT = os.path.join(os.path.dirname(sys.executable), "kbert")


@pytest.fixture(scope="module")
def export(tiny_run, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("export") / "tiny")
    argv = ["export", "--model", tiny_run, "--formats", "tflite", "--quantizations", "float32,dynamic_int8"]
    assert main(argv + ["--output", out]) == 0
    return out


def _json_rows(capsys, *argv):
    capsys.readouterr()
    assert main(["predict", "--json", *argv]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_the_export_gives_the_run_folders_rows(tiny_run, export, capsys, tmp_path):
    ours = _json_rows(capsys, "--model", tiny_run, *TEXTS)
    lite = _json_rows(capsys, "--model", export, *TEXTS)
    assert [r["label"] for r in lite] == [r["label"] for r in ours] and [r["text"] for r in lite] == TEXTS
    assert max(abs(a["probability"] - b["probability"]) for a, b in zip(lite, ours)) <= 1e-5
    int8 = _json_rows(capsys, "--model", export, "--precision", "int8", *TEXTS)
    assert sum(a["label"] == b["label"] for a, b in zip(int8, ours)) >= 0.9 * len(TEXTS)
    # A blank --file line is a blank row, as for a run folder.
    lines = tmp_path / "lines.txt"
    lines.write_text(f"{TEXTS[0]}\n\n{TEXTS[1]}\n", encoding="utf-8")
    rows = _json_rows(capsys, "--model", export, "--file", str(lines))
    assert rows[1] == {"text": "", "label": None, "probability": None} and rows[2]["text"] == TEXTS[1]


def test_the_process_never_imports_tensorflow(export):
    """The console script a user runs, asked in a child that reports the modules it loaded."""
    code = (
        "import sys; sys.argv = ['kbert', 'predict', '--model', sys.argv[1], 'a fine film']; "
        "from keras_bert_impl.cli import main; status = main(sys.argv[1:]); "
        "heavy = ('tensorflow', 'tensorflow_text', 'keras', 'tf_keras'); "
        "print(sorted(m for m in heavy if m in sys.modules)); "
        "sys.exit(status)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, export],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=REPO),
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    label, probability, text = done.stdout.splitlines()[0].split("\t")
    assert label in ("-1", "1") and 0.5 <= float(probability) <= 1 and text == "a fine film"
    assert done.stdout.splitlines()[1] == "[]"
    whole = subprocess.run(
        [KBERT, "predict", "--model", export, "a fine film"], capture_output=True, text=True
    )
    assert whole.returncode == 0 and whole.stdout.splitlines() == done.stdout.splitlines()[:1], whole.stderr


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--precision", "bf16"], "its .tflite files run on litert at --precision fp32 or int8"),
        (["--runtime", "tensorflow"], "its .tflite files run on litert at --precision fp32 or int8"),
        (["--text-b", "b"], "classifies single texts: leave out --text-b"),
        (["--runner", "direct"], "is a kbert export folder; --runner runs a run folder's model.keras"),
        (["--seq-len", "2"], "sequence_length must be an int in [3, "),
    ],
)
def test_what_an_export_cannot_run_is_one_line(export, capsys, argv, fragment):
    capsys.readouterr()
    assert main(["predict", "--model", export, *argv, "a"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err


@pytest.mark.parametrize(
    "flags, runs, says",
    [
        (["avx2", "avx512f", "avx512_vnni"], "int8", "because it has VNNI"),
        (["avx2", "fma"], "int8", "because it has AVX2"),
        (["avx2", "avx512f", "avx512_bf16"], "int8", "because it has AVX2 (int8 ran"),
        (["avx512_bf16"], "fp32", "it has no AVX2 or VNNI (int8 was measured faster than fp32 only on"),
    ],
)
def test_auto_picks_a_file_the_export_has(export, capsys, monkeypatch, flags, runs, says):
    from keras_bert_impl.cpu_features import CpuFeatures

    monkeypatch.setattr(CpuFeatures, "of_this_machine", classmethod(lambda cls: CpuFeatures("a CPU", flags)))
    want = _json_rows(capsys, "--model", export, "--precision", runs, *TEXTS[:8])
    capsys.readouterr()
    assert main(["predict", "--json", "--model", export, "--precision", "auto", *TEXTS[:8]]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == want
    assert err.startswith(f"kbert predict: --precision auto: {runs} on a CPU") and says in err, err
