"""Google's release format round-trips through our importer.

The source model is Google's own modeling.py / run_pretraining.py (PyPI
bert-tensorflow 1.0.4, run by tests/checkpoints/google_reference.py under a
tf.compat.v1 shim), which writes the checkpoint with tf.compat.v1's Saver.
initializer_range=0.5 makes the tanh and erf GELU forms differ by ~1e-3, so
an importer that picked the wrong GELU would fail here.
"""

import json
import os

import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.checkpoints import CheckpointMismatchError, convert_checkpoint
from tests.checkpoints.google_reference import write_google_checkpoint

CONFIG = dict(
    vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
    max_position_embeddings=64, type_vocab_size=2, hidden_act="gelu", initializer_range=0.5,
)


def _inputs():
    rng = np.random.default_rng(7)
    ids = rng.integers(15, 100, (3, 10)).astype("int32")
    ids[:, 0] = 12
    seg = np.zeros_like(ids)
    seg[:, 5:] = 1
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    positions = np.array([[1, 4, 8], [2, 3, 5], [1, 2, 2]], "int32")
    return ids * mask, seg * mask, mask, positions


@pytest.fixture(scope="module")
def google_release(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("google"))
    ids, seg, mask, positions = _inputs()
    reference = write_google_checkpoint(out, CONFIG, ids, seg, mask, masked_positions=positions, seed=3)
    return out, reference


def test_google_checkpoint_reproduces_source_outputs(google_release):
    src, ref = google_release
    model, report = convert_checkpoint(src, format="google")
    assert isinstance(model, kb.BertPretrainer)
    assert report.ok and not report.unexpected and len(report.mapped) == 46
    ids, seg, mask, positions = _inputs()
    out = model.predict({"token_ids": ids, "segment_ids": seg, "padding_mask": mask, "mask_positions": positions}, verbose=0)
    backbone_out = model.backbone.predict({"token_ids": ids, "segment_ids": seg, "padding_mask": mask}, verbose=0)
    real = mask.astype(bool)
    np.testing.assert_allclose(backbone_out["sequence_output"][real], ref["sequence_output"][real], atol=1e-4, rtol=0)
    np.testing.assert_allclose(backbone_out["pooled_output"], ref["pooled_output"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out["mlm_logits"], ref["mlm_logits"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out["nsp_logits"], ref["nsp_logits"], atol=1e-4, rtol=0)
    assert model.backbone.activation == "gelu_approximate"
    assert model.backbone.lowercase is True and len(model.backbone.vocabulary) == 100


def test_backbone_only_reports_heads_as_unexpected(google_release):
    src, _ = google_release
    model, report = convert_checkpoint(src, format="google", with_heads=False)
    assert isinstance(model, kb.BertBackbone)
    assert report.unexpected == sorted(n for n in report.unexpected if n.startswith("cls/")) and len(report.unexpected) == 7


def test_config_that_does_not_fit_names_the_tensors(google_release, tmp_path):
    src, _ = google_release
    for name in os.listdir(src):
        os.symlink(os.path.join(src, name), tmp_path / name)
    os.unlink(tmp_path / "bert_config.json")
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(CONFIG, intermediate_size=48)))
    with pytest.raises(CheckpointMismatchError, match="bert/encoder/layer_0/intermediate/dense/kernel checkpoint \\(32, 64\\) vs model \\(32, 48\\)"):
        convert_checkpoint(str(tmp_path), format="google")


def test_config_with_unknown_field(google_release, tmp_path):
    src, _ = google_release
    for name in os.listdir(src):
        if name != "bert_config.json":
            os.symlink(os.path.join(src, name), tmp_path / name)
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(CONFIG, hiden_size=3)))
    with pytest.raises(ValueError, match="unknown fields \\['hiden_size'\\]"):
        convert_checkpoint(str(tmp_path), format="google")


def test_a_damaged_checkpoint_is_named(google_release, tmp_path):
    """A data file cut short raised IndexError from TensorFlow's reader, an index file cut short an
    OpError: tracebacks, where kbert convert says one line."""
    src, _ = google_release
    for name in os.listdir(src):
        if ".data-" in name:
            (tmp_path / name).write_bytes(open(os.path.join(src, name), "rb").read()[: os.path.getsize(os.path.join(src, name)) // 2])
        else:
            os.symlink(os.path.join(src, name), tmp_path / name)
    with pytest.raises(ValueError, match=r"bert_model.ckpt: the TF checkpoint is truncated or damaged \(IndexError: "
                                         r".*\); download or unzip it again"):
        convert_checkpoint(str(tmp_path), format="google")

