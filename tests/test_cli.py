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
    assert main(["convert", os.path.join(data_dir, "minilm"), "--format", "huggingface", "--output", str(out),
                 "--report-json", str(tmp_path / "report.json")]) == 0
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
    assert main(["convert", os.path.join(data_dir, "minilm"), "--format", "huggingface", "--output", str(out)]) == 2
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
    assert "does not fit the model; nothing was loaded" in err and "bert/embeddings/word_embeddings checkpoint (30522, 384) vs model (30522, 256)" in err
    assert not out.exists()


def test_convert_rejects_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["convert", str(tmp_path), "--format", "onnx", "--output", "x.keras"])
    assert main(["convert", str(tmp_path), "--format", "google", "--output", "x.h5"]) == 2
    assert "--output must end in .keras" in capsys.readouterr().err
