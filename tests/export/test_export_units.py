"""The exporter's units: one per --formats entry that writes into the export folder, on an
`ExportJob` whose `write_file` is the one way they write a file (atomically)."""

import os

import pytest

from keras_bert_impl.conversion.input_contract import EXPORT_FORMATS
from keras_bert_impl_export.export_job import ExportJob
from keras_bert_impl_export.formats import WRITERS


def _job(work, lines):
    return ExportJob(
        serving=None,
        learned=None,
        work=str(work),
        name="bert",
        quantizations=(),
        calibration_texts=None,
        samples=[],
        static_lengths=None,
        log=lines.append,
    )


def test_every_export_format_has_one_unit_and_progress_is_timed(tmp_path):
    assert sorted(WRITERS) == sorted(EXPORT_FORMATS)
    lines = []
    assert _job(tmp_path, lines).timed("TFLite float32", lambda a, b=0: a + b, 1, b=2) == 3
    assert lines[0] == "  TFLite float32 ..." and lines[1].startswith("  TFLite float32: ")


def test_write_file_records_the_file_and_a_failed_write_leaves_the_old_one(tmp_path):
    job = _job(tmp_path, [])
    relative = os.path.join("text", "bert_text_in.tflite")
    job.write_file("text_tflite", relative, b"old")
    assert job.files == {"text_tflite": relative}
    with pytest.raises(TypeError):  # not bytes: the write raises after the file was opened
        job.write_file("text_tflite", relative, "a str, not bytes")
    assert (tmp_path / relative).read_bytes() == b"old"
    assert os.listdir(tmp_path / "text") == ["bert_text_in.tflite"]  # no temporary file left
    job.write_file("text_tflite", relative, b"new")
    assert (tmp_path / relative).read_bytes() == b"new"
