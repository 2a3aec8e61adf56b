"""The folders `kbert serve` finds models in, read as TF Serving reads them, and its start-up
errors on them: one line each (they were tracebacks)."""

import os

import pytest
import tensorflow as tf

from keras_bert_impl.cli import main
from keras_bert_impl_export.serve.servable_model import ServableModel, find_servables


def _save_toy(path, signature=True):
    """A SavedModel of half_plus_two (TF Serving's own example), with or without a signature."""
    module = tf.Module()
    module.half_plus_two = tf.function(lambda x: {"y": x / 2 + 2},
                                       input_signature=[tf.TensorSpec([None], tf.float32, "x")])
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.half_plus_two} if signature else {})
    return str(path)


def test_version_folders_with_leading_zeros_and_stray_files(tmp_path):
    _save_toy(tmp_path / "toy" / "1")
    _save_toy(tmp_path / "toy" / "007")
    (tmp_path / "toy" / ".DS_Store").write_bytes(b"\0")
    # "007" is version 7, read from the folder "007" (it looked for "7", a traceback).
    assert find_servables(str(tmp_path / "toy")) == [("toy", 7, str(tmp_path / "toy" / "007"))]
    export = tmp_path / "export"
    _save_toy(export / "serving" / "mr" / "3")
    (export / "serving" / ".DS_Store").write_bytes(b"\0")  # it stopped start-up: "Not a directory"
    assert find_servables(str(export)) == [("mr", 3, str(export / "serving" / "mr" / "3"))]
    model = ServableModel("toy", 7, str(tmp_path / "toy" / "007"))
    assert model.run("serving_default", {"x": [2.0]})["y"].tolist() == [3.0]


def test_start_up_errors_on_folders_are_one_line(tmp_path, capsys):
    nosig = _save_toy(tmp_path / "nosig" / "1", signature=False)
    assert main(["serve", "--model", nosig, "--port", "0"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "has no serving signature" in lines[-1] and not any("Traceback" in line for line in lines), lines
    toy = _save_toy(tmp_path / "toy" / "1")
    assert main(["serve", "--model", toy, "--host", "127.0.0.256", "--port", "0"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "cannot listen on 127.0.0.256" in last and "pass another --host" in last, last  # it blamed the port


@pytest.mark.parametrize("name", ["team/mr", "mr v2"])
def test_names_that_break_the_url_are_refused(tmp_path, capsys, name):
    assert main(["serve", "--model", str(tmp_path), "--name", name, "--port", "0"]) == 2
    assert f"--name {name!r} cannot be a URL's model name" in capsys.readouterr().err
