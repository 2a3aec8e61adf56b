"""`kbert serve --model EXPORT --runtime litert` (or `--precision int8`): a classifier's export
folder served from its .tflite on LiteRT by a process that never imports TensorFlow, answering as
TF Serving answers from the folder's raw-text SavedModel: the same outputs (the float32 file's
within 1e-4 of the SavedModel's), the same metadata, the same errors' shape (the tiny MR
classifier of tests/commands/conftest.py)."""

import http.client
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from keras_bert_impl.cli import main
from tests.commands.without_tensorflow import kbert_child
from tests.conftest import REPO
from tests.tokenization.references import corpus

TEXTS = corpus("mr")[:12]


@pytest.fixture(scope="module")
def export(tiny_run, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("serve_litert") / "tiny")
    argv = ["export", "--model", tiny_run, "--formats", "saved_model,tflite"]
    assert main([*argv, "--quantizations", "float32,dynamic_int8", "--output", out]) == 0
    return out


def _saved_model(export):
    from keras_bert_impl_export.serve.servable_model import ServableModel, find_servables

    ((name, version, path),) = [s for s in find_servables(export) if not s[0].endswith("_ids")]
    return ServableModel(name, version, path)


def test_the_tflite_answers_and_describes_itself_as_the_saved_model(export):
    from keras_bert_lite.serve.lite_servable import LiteServable

    reference = _saved_model(export)
    lite = LiteServable(export)
    assert (lite.name, lite.version) == (reference.name, reference.version)
    assert lite.metadata() == reference.metadata()
    inputs = {"text": np.array([t.encode("utf-8") for t in TEXTS], dtype=object)}
    ours, theirs = lite.run("serving_default", inputs), reference.run("serving_default", inputs)
    assert sorted(ours) == sorted(theirs)
    for name in ("token_ids", "top_label", "label_names"):
        assert ours[name].tolist() == theirs[name].tolist(), name
    for name in ("logits", "probabilities", "top_score"):
        np.testing.assert_allclose(ours[name], theirs[name], atol=1e-4, err_msg=name)
    int8 = LiteServable(export, "dynamic_int8").run("serving_default", inputs)
    assert np.mean(int8["top_label"] == theirs["top_label"]) >= 0.9


def _request(port, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/v1/models/bert:predict", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    answer = json.loads(response.read())
    conn.close()
    return response.status, answer


def test_the_server_process_never_imports_tensorflow(export):
    from keras_bert_lite.serve.lite_servable import LiteServable

    process = subprocess.Popen(
        [sys.executable, "-c", kbert_child("serve"), "--model", export, "--precision", "int8", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "export")])),
    )
    try:
        line = process.stdout.readline()  # "Serving bert (version 1) at http://127.0.0.1:PORT/v1/models/bert"
        assert line.startswith("Serving bert (version 1)"), line  # the export's name (kbert export --name)
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        status, answer = _request(port, json.dumps({"instances": TEXTS[:3]}))
        expected = LiteServable(export, "dynamic_int8").run(
            "serving_default", {"text": np.array([t.encode() for t in TEXTS[:3]], dtype=object)}
        )
        assert status == 200 and [row["top_label"] for row in answer["predictions"]] == [
            label.decode() for label in expected["top_label"]
        ]
        np.testing.assert_allclose(
            [row["logits"] for row in answer["predictions"]], expected["logits"], atol=1e-6
        )
        # Text that is not UTF-8 is the client's mistake, in one clean line.
        status, answer = _request(port, json.dumps({"instances": [{"b64": "/w=="}]}))
        assert status == 400 and answer["error"].startswith("input 'text' at example 0 is not UTF-8 text")
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err[-3000:]
    assert out.splitlines()[-1] == "heavy []"
    assert "from its dynamic_int8 .tflite on LiteRT" in err


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--runtime", "litert", "--precision", "bf16"], "on litert at --precision fp32 or int8"),
        (["--runtime", "tensorflow", "--precision", "int8"], "and no --runtime tensorflow"),
        (["--runtime", "litert", "--seq-len", "16"], "--seq-len 16 applies to a run folder"),
    ],
)
def test_what_the_tflite_cannot_serve_is_one_line(export, capsys, flags, fragment):
    assert main(["serve", "--model", export, *flags]) == 2
    assert fragment in capsys.readouterr().err


def test_an_export_without_its_tflite_file_is_one_line(export, tmp_path, capsys):
    import shutil

    folder = shutil.copytree(export, tmp_path / "no_tflite")
    shutil.rmtree(folder / "tflite")
    manifest = json.loads((folder / "export.json").read_text())
    manifest["files"] = {k: v for k, v in manifest["files"].items() if not k.startswith("tflite_")}
    (folder / "export.json").write_text(json.dumps(manifest))
    assert main(["serve", "--model", str(folder), "--runtime", "litert"]) == 2
    assert "has no float32 .tflite file" in capsys.readouterr().err
