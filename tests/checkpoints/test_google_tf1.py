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
    vocab_size=100,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    type_vocab_size=2,
    hidden_act="gelu",
    initializer_range=0.5,
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
    # Called eagerly on the one batch: predict() traced a function for each of the two models.
    out = model({"token_ids": ids, "segment_ids": seg, "padding_mask": mask, "mask_positions": positions})
    out = {key: np.asarray(value) for key, value in out.items()}
    backbone_out = model.backbone({"token_ids": ids, "segment_ids": seg, "padding_mask": mask})
    backbone_out = {key: np.asarray(value) for key, value in backbone_out.items()}
    real = mask.astype(bool)
    np.testing.assert_allclose(
        backbone_out["sequence_output"][real], ref["sequence_output"][real], atol=1e-4, rtol=0
    )
    np.testing.assert_allclose(backbone_out["pooled_output"], ref["pooled_output"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out["mlm_logits"], ref["mlm_logits"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out["nsp_logits"], ref["nsp_logits"], atol=1e-4, rtol=0)
    assert model.backbone.activation == "gelu_approximate"
    assert model.backbone.lowercase is True and len(model.backbone.vocabulary) == 100


def test_backbone_only_reports_heads_as_unexpected(google_release):
    src, _ = google_release
    model, report = convert_checkpoint(src, format="google", with_heads=False)
    assert isinstance(model, kb.BertBackbone)
    assert (
        report.unexpected == sorted(n for n in report.unexpected if n.startswith("cls/"))
        and len(report.unexpected) == 7
    )


def test_config_that_does_not_fit_names_the_tensors(google_release, tmp_path):
    src, _ = google_release
    for name in os.listdir(src):
        os.symlink(os.path.join(src, name), tmp_path / name)
    os.unlink(tmp_path / "bert_config.json")
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(CONFIG, intermediate_size=48)))
    with pytest.raises(
        CheckpointMismatchError,
        match="bert/encoder/layer_0/intermediate/dense/kernel checkpoint \\(32, 64\\) vs model \\(32, 48\\)",
    ):
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
            (tmp_path / name).write_bytes(
                open(os.path.join(src, name), "rb").read()[: os.path.getsize(os.path.join(src, name)) // 2]
            )
        else:
            os.symlink(os.path.join(src, name), tmp_path / name)
    with pytest.raises(
        ValueError,
        match=r"bert_model.ckpt: the TF checkpoint is truncated or damaged \(IndexError: "
        r".*\); download or unzip it again",
    ):
        convert_checkpoint(str(tmp_path), format="google")


def _save_tf1(prefix, arrays):
    """A name-based (TF1 Saver layout) checkpoint of {name: array}."""
    import tensorflow as tf

    names = sorted(arrays)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(arrays[n]) for n in names],
    )


def test_several_checkpoints_in_the_folder(google_release, tmp_path):
    """A pretraining run's folder holds model.ckpt-N for several N: the first name in sorted order
    was loaded whatever the 'checkpoint' file said (model.ckpt-1 over model.ckpt-2), silently."""
    import tensorflow as tf

    src, _ = google_release
    for name in os.listdir(src):
        target = name.replace("bert_model.ckpt", "model.ckpt-1")
        os.symlink(os.path.join(src, name), tmp_path / target)
    reader = tf.train.load_checkpoint(os.path.join(src, "bert_model.ckpt"))
    newer = {n: reader.get_tensor(n) + np.float32(0.25) for n in reader.get_variable_to_shape_map()}
    _save_tf1(str(tmp_path / "model.ckpt-2"), newer)
    with pytest.raises(
        ValueError,
        match=r"2 TF checkpoints in .* \(model.ckpt-1, model.ckpt-2\) and no 'checkpoint' "
        r"file to say which is latest: keep one",
    ):
        convert_checkpoint(str(tmp_path), format="google")
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-2"\n')
    model, report = convert_checkpoint(str(tmp_path), format="google")
    assert report.source == str(tmp_path / "model.ckpt-2")
    np.testing.assert_array_equal(
        model.backbone.embeddings.token_embedding.embeddings.numpy(), newer["bert/embeddings/word_embeddings"]
    )
    # A run folder copied from another machine: TensorFlow wrote absolute paths into its 'checkpoint'
    # file. The checkpoint it names is read here (it said "no 'checkpoint' file to say which").
    (tmp_path / "checkpoint").write_text(
        'model_checkpoint_path: "/elsewhere/run/model.ckpt-2"\n'
        'all_model_checkpoint_paths: "/elsewhere/run/model.ckpt-1"\n'
        'all_model_checkpoint_paths: "/elsewhere/run/model.ckpt-2"\n'
    )
    _, report = convert_checkpoint(str(tmp_path), format="google")
    assert report.source == str(tmp_path / "model.ckpt-2")
    # A 'checkpoint' file naming one the folder lacks is refused, never answered with another one.
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-3"\n')
    with pytest.raises(
        FileNotFoundError,
        match=r"checkpoint names model.ckpt-3, which is not in the folder \(it "
        r"holds model.ckpt-1, model.ckpt-2\)",
    ):
        convert_checkpoint(str(tmp_path), format="google")


def test_a_tf2_checkpoint_is_named_as_one(google_release, tmp_path):
    """An object-based TF2 checkpoint (Model Garden's) under --format google listed its 39 BERT
    names as missing, one by one."""
    import tensorflow as tf
    from official.nlp.modeling import networks

    src, _ = google_release
    for name in ("bert_config.json", "vocab.txt"):
        os.symlink(os.path.join(src, name), tmp_path / name)
    encoder = networks.BertEncoderV2(
        vocab_size=100,
        hidden_size=32,
        num_layers=2,
        num_attention_heads=4,
        inner_dim=64,
        max_sequence_length=64,
    )
    ids = np.ones((1, 4), "int32")
    encoder(dict(input_word_ids=ids, input_mask=ids, input_type_ids=ids * 0))
    tf.train.Checkpoint(encoder=encoder).write(str(tmp_path / "bert_model.ckpt"))
    with pytest.raises(
        ValueError,
        match=r"bert_model.ckpt is an object-based TF2 checkpoint \(names such as "
        r"'encoder/.*'\), not Google's TF1 release.*--format model-garden",
    ):
        convert_checkpoint(str(tmp_path), format="google")


def test_a_config_with_fewer_layers_than_the_checkpoint_is_refused(google_release, tmp_path):
    """num_hidden_layers=1 for a 2-layer checkpoint loaded layer 0 alone, listed layer 1's tensors
    as 'unexpected' and wrote a shallower model, exit status 0."""
    src, _ = google_release
    for name in os.listdir(src):
        if name != "bert_config.json":
            os.symlink(os.path.join(src, name), tmp_path / name)
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(CONFIG, num_hidden_layers=1)))
    with pytest.raises(
        CheckpointMismatchError,
        match=r"Encoder tensors the model has no place for \(16\): "
        r"bert/encoder/layer_1/.*: the config describes a smaller encoder "
        r"than the checkpoint's",
    ):
        convert_checkpoint(str(tmp_path), format="google")
