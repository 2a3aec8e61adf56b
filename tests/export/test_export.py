"""kbert export of a real fine-tuned MiniLM on real MR sentences: every artifact checked in
the runtime that serves it (LiteRT, TensorFlow's session loader as TF Serving's C++ loader
uses it, tf.saved_model.load, saved_model_cli), the report's figures, and bad input."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from keras_bert_impl_export.exporter import tokenize
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS
from keras_bert_impl.cpu_features import CpuFeatures
from keras_bert_impl_export.export_signatures import ExportSignatures
from keras_bert_impl.conversion.tflite_converter import (
    ConversionError,
    convert_saved_model,
    explain_converter_error,
    tflite_ops,
)
from keras_bert_impl_export.warmup import read_warmup_requests
from tests.export.conftest import SEQ_LEN, VALIDATION_EXAMPLES
from tests.export import test_tflite_metadata
from tests.export.test_tflite_metadata import run_mediapipe, strip_accents
from tests.harness import minilm_vocab_backbone

# The MediaPipe venv fixture, shared with test_tflite_metadata.py (pytest finds it by this name).
mediapipe_venv = test_tflite_metadata.mediapipe_venv

pytestmark = pytest.mark.slow


def _manifest(folder):
    with open(os.path.join(folder, "export.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def reference(mr_run, mr_export, mr_files):
    """The Keras model's logits on the validation sentences, computed here (not by the report)."""
    model = keras.saving.load_model(os.path.join(mr_run, "model.keras"))
    texts = [text for _, text in mr_files["validation_rows"]]
    serving = ExportSignatures(model, SEQ_LEN)
    x = tokenize(serving, texts)
    logits = model.predict(
        {"token_ids": x["ids"], "segment_ids": x["segment_ids"], "padding_mask": x["mask"]},
        batch_size=64,
        verbose=0,
    )["logits"]
    return {"texts": texts, "x": x, "logits": logits, "model": model}


def _run_tflite(path, x, batch=50):
    runner = Interpreter(model_path=path).get_signature_runner("serving_default")
    parts = [
        runner(**{k: x[k][i : i + batch] for k in EXPORT_ID_INPUTS}) for i in range(0, len(x["ids"]), batch)
    ]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def test_minilm_run_folder_after_one_epoch_is_one_model_file_and_logs(mr_run):
    """Issue 17: the backup (the training state, about 3x the model) goes after a successful
    run, and best.keras is not a second copy of the final model."""
    total, model, logs = (
        _bytes(mr_run),
        _bytes(os.path.join(mr_run, "model.keras")),
        _bytes(os.path.join(mr_run, "logs")),
    )
    print(
        f"run folder {total / 1e6:.1f} MB: model.keras {model / 1e6:.1f} MB, logs {logs / 1e6:.2f} MB, "
        f"{sorted(os.listdir(mr_run))}"
    )
    assert total <= 1.1 * (model + logs)
    assert sorted(os.listdir(mr_run)) == ["logs", "metrics.json", "model.keras", "run.json", "task.json"]


def test_layout_and_manifest(mr_export):
    manifest = _manifest(mr_export)
    assert manifest["head"] == "classifier" and manifest["sequence_length"] == SEQ_LEN
    assert manifest["label_names"] == ["-1", "1"]
    for relative in manifest["files"].values():
        assert os.path.exists(os.path.join(mr_export, relative)), relative
    assert os.path.isfile(os.path.join(mr_export, "serving", "bert", "1", "saved_model.pb"))
    assert os.path.isfile(os.path.join(mr_export, "serving", "bert_ids", "1", "saved_model.pb"))
    with open(os.path.join(mr_export, "labels.txt"), encoding="utf-8") as f:
        assert f.read().split() == ["-1", "1"]
    assert not [n for n in os.listdir(os.path.dirname(mr_export)) if ".partial-" in n]


def test_saved_models_hold_each_weight_once(mr_export, reference):
    weights = sum(w.numpy().nbytes for w in reference["model"].weights)
    for name in ("bert", "bert_ids"):
        folder = os.path.join(mr_export, "serving", name, "1", "variables")
        size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
        assert weights <= size <= 1.05 * weights, (name, size, weights)


def test_tflite_files_match_keras_on_500_mr_sentences(mr_export, reference):
    files = _manifest(mr_export)["files"]
    x, want = reference["x"], reference["logits"]
    assert len(want) >= VALIDATION_EXAMPLES
    results = {}
    for quantization in ("float32", "float16", "dynamic_int8", "int8_mixed"):
        path = os.path.join(mr_export, files[f"tflite_{quantization}"])
        flatbuffer = open(path, "rb").read()
        ops = tflite_ops(flatbuffer)
        assert not [op for op in ops if op.startswith("Flex") or op == "CUSTOM"], (quantization, ops)
        runner = Interpreter(model_content=flatbuffer).get_signature_runner("serving_default")
        assert sorted(runner.get_input_details()) == sorted(EXPORT_ID_INPUTS)
        for name, detail in runner.get_input_details().items():
            assert list(detail["shape_signature"]) == [-1, -1] and detail["dtype"] == np.int32, (name, detail)
        got = _run_tflite(path, x)["logits"]
        results[quantization] = (np.abs(got - want).max(), np.mean(got.argmax(-1) == want.argmax(-1)))
    assert results["float32"][0] <= 1e-4, results
    assert results["float16"][0] <= 1e-2, results
    assert results["dynamic_int8"][1] >= 0.98, results
    assert results["int8_mixed"][1] >= 0.98, results
    assert os.path.getsize(os.path.join(mr_export, files["tflite_dynamic_int8"])) <= 0.30 * os.path.getsize(
        os.path.join(mr_export, files["tflite_float32"])
    )


def test_float_tflite_resizes_to_any_batch_and_length(mr_export, reference):
    path = os.path.join(mr_export, _manifest(mr_export)["files"]["tflite_float32"])
    model, texts = reference["model"], reference["texts"]
    for batch, length in ((1, 9), (3, 17), (5, 128), (2, 512)):
        serving = ExportSignatures(model, length)
        x = tokenize(serving, texts[:batch])
        got = _run_tflite(path, x)["logits"]
        want = model.predict(
            {"token_ids": x["ids"], "segment_ids": x["segment_ids"], "padding_mask": x["mask"]}, verbose=0
        )
        assert got.shape == (batch, 2)
        np.testing.assert_allclose(got, want["logits"], atol=1e-4, rtol=0)


def test_id_tflite_refuses_an_empty_batch_with_an_error(mr_export):
    """Documented (docs/export.md): LiteRT's UNPACK kernel rejects a zero-sized tensor."""
    path = os.path.join(mr_export, _manifest(mr_export)["files"]["tflite_float32"])
    runner = Interpreter(model_path=path).get_signature_runner("serving_default")
    empty = np.zeros((0, 8), np.int32)
    with pytest.raises(RuntimeError, match="UNPACK"):
        runner(ids=empty, mask=empty, segment_ids=empty)


def test_saved_models_match_keras(mr_export, reference):
    files = _manifest(mr_export)["files"]
    x, want, texts = reference["x"], reference["logits"], reference["texts"]
    ids_fn = tf.saved_model.load(os.path.join(mr_export, files["saved_model_ids"])).signatures[
        "serving_default"
    ]
    text_fn = tf.saved_model.load(os.path.join(mr_export, files["saved_model_text"])).signatures[
        "serving_default"
    ]
    got_ids = np.concatenate(
        [
            ids_fn(**{k: tf.constant(x[k][i : i + 100]) for k in EXPORT_ID_INPUTS})["logits"].numpy()
            for i in range(0, len(texts), 100)
        ]
    )
    text_out = [text_fn(text=tf.constant(texts[i : i + 100])) for i in range(0, len(texts), 100)]
    got_text = np.concatenate([o["logits"].numpy() for o in text_out])
    assert np.abs(got_ids - want).max() <= 1e-4
    assert np.abs(got_text - want).max() <= 1e-4
    np.testing.assert_array_equal(np.concatenate([o["token_ids"].numpy() for o in text_out]), x["ids"])
    top = np.concatenate([o["top_label"].numpy() for o in text_out])
    assert [t.decode() for t in top] == [["-1", "1"][i] for i in want.argmax(-1)]
    names = text_out[0]["label_names"].numpy()
    assert names.shape == (100, 2) and [n.decode() for n in names[0]] == ["-1", "1"]


def test_text_signature_truncates_long_text_and_takes_empty_input(mr_export, reference):
    text_fn = tf.saved_model.load(os.path.join(mr_export, "serving", "bert", "1")).signatures[
        "serving_default"
    ]
    long_text = " ".join(reference["texts"][:20])
    out = text_fn(text=tf.constant([long_text, ""]))
    ids = out["token_ids"].numpy()
    assert ids.shape == (2, SEQ_LEN)
    assert ids[0, -1] == 102 and (ids[0] != 0).all()  # truncated to SEQ_LEN, [SEP] last
    assert list(ids[1, :3]) == [101, 102, 0]  # an empty string is [CLS] [SEP]
    empty = text_fn(text=tf.constant([], tf.string))
    assert empty["probabilities"].shape == (0, 2) and empty["top_label"].shape == (0,)


def test_warmup_requests_are_tf_serving_prediction_logs(mr_export):
    text = read_warmup_requests(os.path.join(mr_export, "serving", "bert", "1"))
    ids = read_warmup_requests(os.path.join(mr_export, "serving", "bert_ids", "1"))
    assert text and ids
    name, signature, inputs = text[0]
    assert (name, signature, sorted(inputs)) == ("bert", "serving_default", ["text"])
    assert inputs["text"].dtype == object and len(inputs["text"]) >= 1
    name, signature, inputs = ids[0]
    assert (name, signature, sorted(inputs)) == ("bert_ids", "serving_default", sorted(EXPORT_ID_INPUTS))
    fn = tf.saved_model.load(os.path.join(mr_export, "serving", "bert_ids", "1")).signatures[
        "serving_default"
    ]
    assert fn(**{k: tf.constant(v) for k, v in inputs.items()})["logits"].shape[0] == len(inputs["ids"])


# TensorFlow's session-based loader, as TF Serving's C++ SavedModelBundle loads a model: the
# signature's tensors looked up by name and run in a session. In a fresh process.
SESSION_LOADER = r"""
import json, sys
import numpy as np
import tensorflow as tf
text_model = sys.argv[3] == "text"
if text_model:
    import tensorflow_text  # noqa: F401  registers the tokenizer's ops, as TF Serving must
tf.compat.v1.disable_eager_execution()
with tf.compat.v1.Session(graph=tf.Graph()) as sess:
    meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], sys.argv[1])
    signature = meta.signature_def["serving_default"]
    feeds = json.load(open(sys.argv[2]))
    dtype = object if text_model else np.int32
    feed = {signature.inputs[k].name: np.array(v, dtype=dtype) for k, v in feeds.items()}
    logits = sess.run(signature.outputs["logits"].name, feed)
print(json.dumps({"logits": logits.tolist(), "tensorflow_text": "tensorflow_text" in sys.modules}))
"""


def _fresh_process(code, *args):
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_session_loader_in_a_fresh_process(mr_export, reference, tmp_path):
    x, want = reference["x"], reference["logits"]
    feeds = tmp_path / "ids.json"
    feeds.write_text(json.dumps({k: x[k][:16].tolist() for k in EXPORT_ID_INPUTS}))
    out = _fresh_process(
        SESSION_LOADER, os.path.join(mr_export, "serving", "bert_ids", "1"), str(feeds), "ids"
    )
    assert out["tensorflow_text"] is False  # the id model needs no tensorflow-text op
    assert np.abs(np.array(out["logits"]) - want[:16]).max() <= 1e-4
    texts = tmp_path / "text.json"
    texts.write_text(json.dumps({"text": reference["texts"][:16]}))
    out = _fresh_process(SESSION_LOADER, os.path.join(mr_export, "serving", "bert", "1"), str(texts), "text")
    assert np.abs(np.array(out["logits"]) - want[:16]).max() <= 1e-4


def test_saved_model_cli_runs_both_models(mr_export, reference, tmp_path):
    # saved_model_cli's own entry point, with tensorflow_text imported first for the text model.
    cli = (
        "import sys, tensorflow_text; from tensorflow.python.tools import saved_model_cli; "
        "sys.exit(saved_model_cli.main())"
    )
    texts = reference["texts"][:2]
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            cli,
            "run",
            "--dir",
            os.path.join(mr_export, "serving", "bert", "1"),
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--input_exprs",
            f"text={texts!r}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "top_label" in result.stdout and "logits" in result.stdout
    inputs = []
    for name in EXPORT_ID_INPUTS:  # its --input_exprs evaluates literals only: int32 arrays go in .npy files
        np.save(tmp_path / f"{name}.npy", reference["x"][name][:2])
        inputs.append(f"{name}={tmp_path / f'{name}.npy'}")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            cli,
            "run",
            "--dir",
            os.path.join(mr_export, "serving", "bert_ids", "1"),
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--inputs",
            ";".join(inputs),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "probabilities" in result.stdout


def test_report_covers_every_artifact(mr_export):
    with open(os.path.join(mr_export, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    assert report["validation_examples"] == VALIDATION_EXAMPLES
    rows = {row["artifact"]: row for row in report["artifacts"]}
    assert set(rows) == set(_manifest(mr_export)["files"])
    for row in rows.values():
        assert row["size_bytes"] > 0 and row["batch1_p50_ms"] > 0 and 0 <= row["value"] <= 1
        assert row["batch1_p90_ms"] >= row["batch1_p50_ms"]
    assert rows["tflite_float32"]["max_abs_difference"] <= 1e-4
    assert abs(rows["tflite_dynamic_int8"]["value"] - report["keras"]["value"]) <= 0.01
    with open(os.path.join(mr_export, "report.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    markdown = open(os.path.join(mr_export, "report.md"), encoding="utf-8").read()
    assert "| tflite_dynamic_int8 |" in markdown
    # The latencies name the CPU they were measured on, as util-linux's lscpu reads it
    # (tests/test_cpu_features.py holds the two to each other).
    this_cpu = CpuFeatures.of_this_machine()
    assert report["machine"]["cpu"] == this_cpu.to_dict()
    assert f"CPUs of {this_cpu.describe()} (" in markdown
    # Where each file runs, from static checks (conversion/tflite_targets.py): the free-shape
    # files on the CPU only, MediaPipe's [1, S] files have the GPU delegate's static shapes,
    # and none is integer-only.
    assert "| runs on |" in markdown
    for name, row in rows.items():
        want = (
            ["TensorFlow"]
            if name.startswith("saved_model")
            else ["CPU", "GPU (shapes)"]
            if name.startswith("mediapipe")
            else ["CPU"]
        )
        assert row["runs_on"] == want, (name, row["runs_on"])


# ---- bad input ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory):
    backbone = minilm_vocab_backbone()
    path = str(tmp_path_factory.mktemp("tiny") / "tiny.keras")
    kb.BertClassifier(backbone, num_classes=2, label_names=["neg", "pos"]).save(path)
    return path


def _export(capsys, *argv):
    code = main(["export", *argv])
    return code, capsys.readouterr().err


QUICK = ["--formats", "saved_model", "--seq-len", "16"]


def test_existing_output_is_refused_unless_overwrite(tiny_classifier, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert _export(capsys, "--model", tiny_classifier, "--output", out, *QUICK)[0] == 0
    stamp = os.path.getmtime(os.path.join(out, "export.json"))
    code, err = _export(capsys, "--model", tiny_classifier, "--output", out, *QUICK)
    assert code == 2 and "already exists and holds an export" in err and "--overwrite" in err
    assert os.path.getmtime(os.path.join(out, "export.json")) == stamp
    assert _export(capsys, "--model", tiny_classifier, "--output", out, *QUICK, "--overwrite")[0] == 0


@pytest.mark.parametrize("formats", [QUICK, ["--formats", "huggingface"]])
@pytest.mark.parametrize("where", ["run", "parent"])
def test_output_that_holds_the_model_is_refused_even_with_overwrite(
    tiny_classifier, tmp_path, capsys, formats, where
):
    # --overwrite replaces the whole output folder: a run folder (or a folder above it) as --output
    # used to lose the very model it was exported from.
    run = tmp_path / "runs" / "mr"
    run.mkdir(parents=True)
    with open(tiny_classifier, "rb") as source, open(run / "model.keras", "wb") as copy:
        copy.write(source.read())
    out = run if where == "run" else tmp_path / "runs"
    code, err = _export(capsys, "--model", str(run), "--output", str(out), *formats, "--overwrite")
    assert code == 2 and f"--output {out} holds --model {run}" in err and "outside that folder" in err
    assert os.listdir(run) == ["model.keras"] and sorted(os.listdir(tmp_path)) == ["runs"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--seq-len", "65"], "--seq-len 65 is outside 3..64"),
        (["--seq-len", "0"], "--seq-len 0 is outside 3..64"),
        (["--seq-len", "-1"], "--seq-len -1 is outside 3..64"),
        (["--formats", "saved_model,onnx"], "--formats takes a comma-separated subset of"),
        (
            ["--formats", "tflite", "--quantizations", "int8_mixed"],
            "int8_mixed needs real examples to calibrate on",
        ),
        (
            ["--formats", "tflite", "--quantizations", "int8_mixed", "--calibration", "EMPTY"],
            "gave no examples",
        ),
        (
            ["--formats", "tflite", "--quantizations", "int8_mixed", "--calibration", "MISSING"],
            "no such file",
        ),
        (["--validation", "OTHER_TASK"], "--validation"),
        # The integer-only file's calibration from a file of another task (SQuAD's JSON lines).
        (
            ["--formats", "tflite", "--quantizations", "int8_only", "--calibration", "OTHER_TASK"],
            "--calibration",
        ),
    ],
)
def test_bad_flags_exit_2_and_write_nothing(tiny_classifier, tmp_path, capsys, extra, message):
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "other.jsonl").write_text('{"question": "q", "context": "c"}\n')
    extra = [
        {
            "EMPTY": str(tmp_path / "empty.csv"),
            "MISSING": str(tmp_path / "nope.csv"),
            "OTHER_TASK": str(tmp_path / "other.jsonl"),
        }.get(a, a)
        for a in extra
    ]
    out = tmp_path / "out"
    code, err = _export(capsys, "--model", tiny_classifier, "--output", str(out), *extra)
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if ".partial-" in p]


def test_model_without_vocabulary_says_how_to_fix(tmp_path, capsys):
    backbone = kb.BertBackbone(
        vocabulary_size=50,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
    )
    path = str(tmp_path / "novocab.keras")
    kb.BertClassifier(backbone, num_classes=2).save(path)
    code, err = _export(capsys, "--model", path, "--output", str(tmp_path / "out"))
    assert code == 2 and "carries no vocabulary" in err and "set_vocabulary" in err


def test_a_head_without_export_is_named(tmp_path, capsys, tiny_classifier):
    model = keras.saving.load_model(tiny_classifier)
    with pytest.raises(ValueError, match="kbert export has no export for a BertPretrainer"):
        ExportSignatures(kb.BertPretrainer(model.backbone), 16)


def test_unconvertible_op_names_the_op_and_the_layer(tmp_path, monkeypatch, tiny_classifier):
    """A layer written with x[:, None] (a StridedSlice with a new axis, which needs Flex at
    dynamic shapes): the error names the TensorFlow op and the Keras layer."""
    import keras_bert_impl.layers.multi_head_attention as attention

    monkeypatch.setattr(
        attention, "merge_masks", lambda padding_mask, *a: keras.ops.cast(padding_mask, "bool")[:, None, :]
    )
    model = keras.saving.load_model(tiny_classifier)
    ExportSignatures(model, 16).export_archive(text=False).write_out(str(tmp_path / "sm"), verbose=False)
    with pytest.raises(
        ConversionError,
        match=r"TFLite has no builtin op for TensorFlow's StridedSlice, used in layer '.*transformer_layer_0",
    ):
        convert_saved_model(str(tmp_path / "sm"), "float32")
    assert "StridedSlice" in explain_converter_error(
        Exception('fused["StridedSlice:", "a/b/strided_slice@x"]')
    )


def test_killed_export_leaves_nothing_and_the_next_run_starts_clean(tiny_classifier, tmp_path):
    out = tmp_path / "out"
    code = (
        "import os, signal, sys\n"
        "import keras_bert_impl_export.formats.saved_model_files as e\n"
        "original = e.write_warmup_requests\n"
        "def killed(*a, **k):\n"
        "    original(*a, **k)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "e.write_warmup_requests = killed\n"
        "from keras_bert_impl.cli import main\n"
        f"sys.exit(main(['export', '--model', {tiny_classifier!r}, '--output', {str(out)!r}, "
        "'--formats', 'saved_model', '--seq-len', '16']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == -9
    leftovers = [p for p in os.listdir(tmp_path) if ".partial-" in p]
    assert leftovers and not out.exists()  # a half-written folder, never at OUTPUT
    assert (
        main(
            [
                "export",
                "--model",
                tiny_classifier,
                "--output",
                str(out),
                "--formats",
                "saved_model",
                "--seq-len",
                "16",
            ]
        )
        == 0
    )
    assert not [p for p in os.listdir(tmp_path) if ".partial-" in p]
    assert os.path.isfile(out / "export.json")


def test_mediapipe_text_classifier_runs_the_exported_models(mr_export, reference, mediapipe_venv, tmp_path):
    """MediaPipe Tasks (its own venv) loads mediapipe/bert*.tflite (three precisions) as
    written and classifies raw MR sentences like our Python pipeline. MediaPipe's tokenizer
    keeps accents that BERT's uncased normalisation strips, so sentences with accented
    letters are counted apart (tests/export/test_tflite_metadata.py measures them)."""
    files = _manifest(mr_export)["files"]
    texts, want = reference["texts"][:250], reference["logits"][:250]
    assert sorted(k for k in files if k.startswith("mediapipe")) == [
        "mediapipe",
        "mediapipe_float16",
        "mediapipe_int8",
    ]
    paths = {
        key: os.path.join(mr_export, files[key])
        for key in ("mediapipe", "mediapipe_float16", "mediapipe_int8")
    }
    result = run_mediapipe(tmp_path, texts, classify=list(paths.values()))
    probabilities = np.exp(want) / np.exp(want).sum(-1, keepdims=True)
    same = np.array([strip_accents(t) == t for t in texts])
    assert same.sum() >= 200
    scores = {key: np.array(result["classify"][path])[same] for key, path in paths.items()}
    for path in paths.values():
        assert result["labels"][path] == ["-1", "1"]
    np.testing.assert_array_equal(scores["mediapipe"].argmax(1), want[same].argmax(1))
    assert np.abs(scores["mediapipe"] - probabilities[same]).max() <= 1e-3
    assert np.abs(scores["mediapipe_float16"] - probabilities[same]).max() <= 1e-2
    assert np.mean(scores["mediapipe_int8"].argmax(1) == want[same].argmax(1)) >= 0.98


def test_mediapipe_text_embedder_runs_the_exported_embedder(minilm_keras, mr_files, mediapipe_venv, tmp_path):
    """kbert export of a converted backbone (a mean-pooled BertEmbedder): MediaPipe's
    TextEmbedder on mediapipe/bert.tflite gives Keras' embeddings (cosine >= 0.9999) on raw
    MR sentences whose ids MediaPipe's tokenizer shares (no accented letters)."""
    out = str(tmp_path / "embedder")
    assert (
        main(
            [
                "export",
                "--model",
                minilm_keras,
                "--output",
                out,
                "--formats",
                "mediapipe",
                "--seq-len",
                "32",
                "--quantizations",
                "float32,dynamic_int8",
            ]
        )
        == 0
    )
    manifest = _manifest(out)
    assert manifest["head"] == "embedder" and set(manifest["files"]) == {"mediapipe", "mediapipe_int8"}
    texts = [text for _, text in mr_files["validation_rows"] if strip_accents(text) == text][:200]
    path = os.path.join(out, manifest["files"]["mediapipe"])
    got = np.array(run_mediapipe(tmp_path, texts, embed=[path])["embed"][path])
    embedder = kb.BertEmbedder(keras.saving.load_model(minilm_keras), pooling="mean")
    x = tokenize(ExportSignatures(embedder, 32), texts)
    want = embedder.predict(
        {"token_ids": x["ids"], "segment_ids": x["segment_ids"], "padding_mask": x["mask"]}, verbose=0
    )
    want = want["embeddings"]
    cosine = np.sum(got * want, -1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(want, axis=-1))
    assert len(texts) == 200 and cosine.min() >= 0.9999, cosine.min()


_LITE_CHILD = """
import json, sys
import numpy as np
from keras_bert_lite import LiteTextClassifier
export_dir, texts_file, out = sys.argv[1:]
texts = json.load(open(texts_file, encoding="utf-8"))
arrays = {}
for quantization in ("float32", "dynamic_int8"):
    classifier = LiteTextClassifier(export_dir, quantization=quantization, batch_size=32)
    arrays[quantization] = classifier.predict(texts)["logits"]
arrays["ids"] = np.array([classifier.tokenizer.pack(t, sequence_length=classifier.sequence_length)[0]
                          for t in texts], dtype=object)
np.savez(out, **arrays)
print(sorted(m for m in ("tensorflow", "tensorflow_text", "keras", "tf_keras") if m in sys.modules))
"""


def test_lite_classifier_runs_the_export_without_tensorflow(mr_export, reference, tmp_path):
    """keras_bert_lite in a child that never imports TensorFlow or Keras, on the 500 held-out
    sentences: the export's own ids (row by row, unpadded), float32 within 1e-4 of Keras, the
    dynamic int8 file's top label on at least 98% (the bounds of the .tflite files' test above)."""
    texts = reference["texts"]
    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps(texts), encoding="utf-8")
    out = tmp_path / "lite.npz"
    child = subprocess.run(
        [sys.executable, "-c", _LITE_CHILD, mr_export, str(texts_file), str(out)],
        capture_output=True,
        text=True,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.strip() == "[]", child.stdout  # no TensorFlow, tensorflow-text or Keras loaded
    assert child.stderr == "", child.stderr  # LiteRT's delegate line held back
    got = np.load(out, allow_pickle=True)
    ids, mask = reference["x"]["ids"], reference["x"]["mask"]
    assert [list(row) for row in got["ids"]] == [row[m == 1].tolist() for row, m in zip(ids, mask)]
    want = reference["logits"]
    assert np.abs(got["float32"] - want).max() <= 1e-4
    assert np.mean(got["dynamic_int8"].argmax(-1) == want.argmax(-1)) >= 0.98
