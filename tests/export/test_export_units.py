"""The exporter's units: one per --formats entry that writes into the export folder, on an
`ExportJob` whose `write_file` is the one way they write a file (atomically); and the report's
batching of the examples."""

import os

import numpy as np
import pytest
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl.conversion.input_contract import EXPORT_FORMATS
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS
from keras_bert_impl_export.export_job import ExportJob
from keras_bert_impl_export.export_signatures import ExportSignatures
from keras_bert_impl_export.formats import WRITERS
from keras_bert_impl_export.report import _run_all
from keras_bert_impl_export.tokenized_examples import tokenize
from tests.harness import minilm_vocab_backbone


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


@pytest.mark.parametrize("pooling", ["mean", "pooled"])
def test_report_batches_cut_to_their_longest_row_give_the_full_width_outputs_in_order(pooling):
    """The report runs a classifier's ids sorted by length, each batch cut to its longest row:
    the outputs come back in the examples' order and equal those at the full width."""
    serving = ExportSignatures(kb.BertClassifier(minilm_vocab_backbone(), num_classes=3, pooling=pooling), 32)
    texts = ["short", "a much longer sentence than the first one, " * 6, "", "mid length text here", "x y"]
    x = tokenize(serving, texts)
    widths = []

    def call(ids, batch_texts):
        widths.append(ids["ids"].shape)
        out = serving.id_outputs(*(tf.constant(ids[k]) for k in EXPORT_ID_INPUTS))
        return {**out, "texts": np.array(batch_texts)}

    full = _run_all(call, x, texts, 2, cut=False)
    assert widths == [(2, 32), (2, 32), (1, 32)]
    widths.clear()
    cut = _run_all(call, x, texts, 2, cut=True)
    lengths = x["mask"].sum(axis=1)  # [5]: 3, 32 (truncated), 2, 6, 4
    assert widths == [(2, 32), (2, 4), (1, 2)], (widths, lengths)
    assert list(cut["texts"]) == list(full["texts"]) == texts
    np.testing.assert_allclose(cut["logits"], full["logits"], atol=1e-5)
    np.testing.assert_allclose(cut["probabilities"], full["probabilities"], atol=1e-6)
