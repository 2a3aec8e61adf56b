"""`kbert convert` end to end on the real MiniLM folder, and its failures."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

from keras_bert_impl.cli import main
from keras_bert_impl.tokenization import BertPreprocessor


def test_convert_writes_model_with_vocabulary(data_dir, tmp_path, capsys):
    out = tmp_path / "minilm.keras"
    assert (
        main(
            [
                "convert",
                os.path.join(data_dir, "minilm"),
                "--format",
                "huggingface",
                "--output",
                str(out),
                "--report-json",
                str(tmp_path / "report.json"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "mapped:         103 tensors" in printed and "missing:        0" in printed
    report = json.loads((tmp_path / "report.json").read_text())
    assert len(report["mapped"]) == 103 and report["missing"] == []
    model = keras.saving.load_model(str(out))
    # Only the model path is needed downstream: the preprocessor comes from it.
    pre = BertPreprocessor.from_model(model, sequence_length=16)
    ids = pre(["The quick brown fox jumps over the lazy dog."])["token_ids"].numpy()[0]
    assert ids[:12].tolist() == [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1012, 102]
    assert np.isfinite(model.predict(pre(["hello world"]), verbose=0)["pooled_output"]).all()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")] == []
    # An existing model is never replaced without --overwrite.
    written = out.read_bytes()
    assert (
        main(["convert", os.path.join(data_dir, "minilm"), "--format", "huggingface", "--output", str(out)])
        == 2
    )
    assert "already exists: add --overwrite" in capsys.readouterr().err
    assert out.read_bytes() == written


def test_convert_failure_writes_nothing(data_dir, tmp_path, capsys):
    src = tmp_path / "src"
    shutil.copytree(os.path.join(data_dir, "minilm"), src, ignore=shutil.ignore_patterns("model.safetensors"))
    os.symlink(os.path.join(data_dir, "minilm", "model.safetensors"), src / "model.safetensors")
    config = json.loads((src / "config.json").read_text())
    config["hidden_size"] = 256
    config["num_attention_heads"] = 4
    (src / "config.json").write_text(json.dumps(config))
    out = tmp_path / "bad.keras"
    assert main(["convert", str(src), "--format", "huggingface", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        "does not fit the model; nothing was loaded" in err
        and "bert/embeddings/word_embeddings checkpoint (30522, 384) vs model (30522, 256)" in err
    )
    # Eight of the 97 shape mismatches, not an 8 KB line of all of them; one line, as every kbert failure.
    assert "Shape mismatch (97): " in err and ", ... and 89 more." in err and len(err) < 1500
    assert len(err.strip().splitlines()) == 1 and "nothing was loaded. Shape mismatch (97)" in err
    assert not out.exists()


def test_convert_rejects_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["convert", str(tmp_path), "--format", "onnx", "--output", "x.keras"])
    assert main(["convert", str(tmp_path), "--format", "google", "--output", "x.h5"]) == 2
    assert "--output must end in .keras" in capsys.readouterr().err


def test_no_flag_is_taken_for_a_prefix_of_another(capsys):
    """allow_abbrev=False on the top parser and every sub-parser: `--text` was once silently
    `kbert predict --text-b`; now it is argparse's own error, exit status 2."""
    import argparse

    from keras_bert_impl.cli import build_parser

    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "--model", "run", "--text", "a film"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --text" in capsys.readouterr().err
    parser = build_parser()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)][0]
    assert not parser.allow_abbrev and len(subparsers.choices) >= 16
    assert [name for name, sub in subparsers.choices.items() if sub.allow_abbrev] == []


def _builds_a_parser(node):
    """An `ArgumentParser(...)` call, or the `super().__init__(...)` of a class deriving from
    it (cli.py's parser class, which passes allow_abbrev itself)."""
    import ast

    if not isinstance(node, ast.Call):
        return False
    if getattr(node.func, "attr", None) == "ArgumentParser":
        return True
    return (
        getattr(node.func, "attr", None) == "__init__"
        and isinstance(node.func.value, ast.Call)
        and getattr(node.func.value.func, "id", None) == "super"
        and getattr(node, "_in_parser_class", False)
    )


def test_every_argument_parser_refuses_abbreviations():
    """Every other ArgumentParser of the library and the export wing (demo scripts, the
    char table, the TF Serving client) is built with allow_abbrev=False too."""
    import ast

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found, bad = 0, []
    for top in ("keras_bert_impl", "export"):
        for root, _, names in os.walk(os.path.join(repo, top)):
            for name in (n for n in names if n.endswith(".py")):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), path)
                for cls in ast.walk(tree):
                    if isinstance(cls, ast.ClassDef) and any(
                        getattr(b, "attr", None) == "ArgumentParser" for b in cls.bases
                    ):
                        for inner in ast.walk(cls):
                            inner._in_parser_class = True
                for node in ast.walk(tree):
                    if _builds_a_parser(node):
                        found += 1
                        keywords = {k.arg: k.value for k in node.keywords}
                        value = keywords.get("allow_abbrev")
                        if not (isinstance(value, ast.Constant) and value.value is False):
                            bad.append(f"{os.path.relpath(path, repo)}:{node.lineno}")
    assert found >= 5 and bad == [], bad


def test_convert_flags_that_do_not_go_together(data_dir, tmp_path, capsys):
    """--report-json at --output's path was written, then replaced by the model without a word; an
    existing --report-json file was replaced without --overwrite; --allow-pickle with another format
    did nothing."""
    minilm = os.path.join(data_dir, "minilm")
    out = tmp_path / "m.keras"
    assert (
        main(["convert", minilm, "--format", "huggingface", "--output", str(out), "--report-json", str(out)])
        == 2
    )
    assert (
        f"--report-json {out} is the --output path: give the report its own file" in capsys.readouterr().err
    )
    report = tmp_path / "report.json"
    report.write_text('{"mine": 1}')
    assert (
        main(
            ["convert", minilm, "--format", "huggingface", "--output", str(out), "--report-json", str(report)]
        )
        == 2
    )
    assert f"--report-json {report} already exists: add --overwrite to replace it" in capsys.readouterr().err
    assert report.read_text() == '{"mine": 1}' and not out.exists()
    assert main(["convert", minilm, "--format", "google", "--output", str(out), "--allow-pickle"]) == 2
    assert (
        "--allow-pickle reads Hugging Face's pytorch_model.bin: it does nothing with --format google"
        in capsys.readouterr().err
    )


def test_convert_pickle_without_torch_is_one_line(data_dir, tmp_path, capsys, monkeypatch):
    """--allow-pickle where torch is not installed was an ImportError traceback."""
    import sys

    src = tmp_path / "src"
    src.mkdir()
    for name in ("config.json", "vocab.txt"):
        shutil.copy(os.path.join(data_dir, "minilm", name), src / name)
    (src / "pytorch_model.bin").write_bytes(b"never unpickled")
    monkeypatch.setitem(sys.modules, "torch", None)  # as where torch is not installed
    assert (
        main(
            [
                "convert",
                str(src),
                "--format",
                "huggingface",
                "--output",
                str(tmp_path / "m.keras"),
                "--allow-pickle",
            ]
        )
        == 2
    )
    assert (
        "kbert convert: Reading pytorch_model.bin needs torch: pip install torch" in capsys.readouterr().err
    )


def test_convert_writes_the_report_only_with_the_model(data_dir, tmp_path, capsys, monkeypatch):
    """The --report-json file was written before the model: a save that failed (a full disk) left a
    report of a conversion that wrote nothing."""
    import keras_bert_impl.training

    def full_disk(model, path):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(keras_bert_impl.training, "save_model", full_disk)
    out, report = tmp_path / "m.keras", tmp_path / "report.json"
    assert (
        main(
            [
                "convert",
                os.path.join(data_dir, "minilm"),
                "--format",
                "huggingface",
                "--output",
                str(out),
                "--report-json",
                str(report),
            ]
        )
        == 2
    )
    assert "No space left on device" in capsys.readouterr().err
    assert not out.exists() and not report.exists()
