"""Parity with tf-models-official: a BertEncoderV2 with random weights, copied
through our importer, gives the same outputs on random ids with padding."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from official.nlp.modeling import networks

import keras_bert_impl as kb
from keras_bert_impl.checkpoints import CheckpointMismatchError, convert_checkpoint
from keras_bert_impl.checkpoints.model_garden import load_model_garden_encoder
from keras_bert_impl.commands.model_files import load_init
from tests.harness import random_inputs


def _encoder(preset, activation="gelu", encoder_class="BertEncoderV2", **overrides):
    c = dict(kb.BERT_PRESETS[preset], **overrides)
    act = {
        "gelu": lambda x: tf_keras.activations.gelu(x, approximate=False),
        "gelu_approximate": lambda x: tf_keras.activations.gelu(x, approximate=True),
    }[activation]
    common = dict(
        vocab_size=c["vocabulary_size"],
        hidden_size=c["hidden_dim"],
        num_layers=c["num_layers"],
        num_attention_heads=c["num_heads"],
        max_sequence_length=c["max_sequence_length"],
        type_vocab_size=c["num_segments"],
        # BERT's own initializer range; biases and LayerNorms are perturbed below.
        initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02),
    )
    if encoder_class == "BertEncoderV2":
        encoder = networks.BertEncoderV2(inner_dim=c["intermediate_dim"], inner_activation=act, **common)
    else:  # the functional BertEncoder, with its own argument names and list outputs
        encoder = networks.BertEncoder(
            intermediate_size=c["intermediate_dim"], activation=act, dict_outputs=True, **common
        )
    x = random_inputs(batch=4, length=33, vocabulary_size=c["vocabulary_size"], pad_last=11, seed=5)
    x["padding_mask"][2, 20:] = 0
    x = {k: v * x["padding_mask"] for k, v in x.items()}
    mg_inputs = dict(
        input_word_ids=x["token_ids"], input_mask=x["padding_mask"], input_type_ids=x["segment_ids"]
    )
    encoder(mg_inputs)
    # Random non-trivial biases and LayerNorm parameters, so a dropped or swapped one shows.
    rng = np.random.default_rng(11)
    for w in encoder.weights:
        if any(k in w.name for k in ("bias", "beta", "gamma")):
            w.assign(w.numpy() + rng.normal(0, 0.1, w.shape).astype("float32"))
    return encoder, x, encoder(mg_inputs, training=False)


def _outputs(backbone, x):
    """The backbone's outputs for the one small batch `x`, called eagerly (as the Model Garden
    reference is): predict() traced a function per backbone for that one batch."""
    return {key: np.asarray(value) for key, value in backbone(x, training=False).items()}


@pytest.mark.parametrize(
    "preset,activation,encoder_class",
    [
        ("bert_tiny", "gelu", "BertEncoder"),
        ("bert_mini", "gelu_approximate", "BertEncoderV2"),
        ("bert_small", "gelu", "BertEncoderV2"),
        ("bert_small", "gelu_approximate", "BertEncoder"),
    ],
)
def test_model_garden_parity(preset, activation, encoder_class):
    encoder, x, ref = _encoder(preset, activation, encoder_class)
    backbone, report = load_model_garden_encoder(encoder)
    assert report.ok and not report.unexpected
    assert sorted(c for c, _, _ in report.mapped) == sorted(w.name for w in encoder.weights)
    assert backbone.activation == activation
    out = _outputs(backbone, x)
    real = x["padding_mask"].astype(bool)
    seq_diff = np.abs(out["sequence_output"][real] - ref["sequence_output"].numpy()[real]).max()
    pooled_diff = np.abs(out["pooled_output"] - ref["pooled_output"].numpy()).max()
    print(f"{encoder_class} {preset}: sequence {seq_diff:.2e}, pooled {pooled_diff:.2e}")
    assert seq_diff <= 1e-5 and pooled_diff <= 1e-5


def _write_config(folder, encoder, **changes):
    config = encoder.get_config()
    config["inner_activation"] = "gelu"  # the exact form, as a name JSON can carry
    (folder / "encoder_config.json").write_text(
        json.dumps(
            {
                k: v
                for k, v in dict(config, **changes).items()
                if k
                in (
                    "vocab_size",
                    "hidden_size",
                    "num_layers",
                    "num_attention_heads",
                    "inner_dim",
                    "inner_activation",
                    "max_sequence_length",
                    "type_vocab_size",
                )
            }
        )
    )


def test_model_garden_checkpoint(tmp_path):
    encoder, x, ref = _encoder("bert_tiny", vocabulary_size=64)
    tf.train.Checkpoint(encoder=encoder).save(str(tmp_path / "ckpt"))
    _write_config(tmp_path, encoder)
    backbone, report = convert_checkpoint(str(tmp_path), format="model-garden")
    assert report.ok
    assert report.ignored == [("save_counter/.ATTRIBUTES/VARIABLE_VALUE", "the checkpoint's save counter")]
    # The report names the checkpoint's own keys (they were Google's names, which it does not hold).
    keys = {name for name, _ in tf.train.list_variables(report.source)}
    assert len(report.mapped) == 39 and {c for c, _, _ in report.mapped} <= keys
    assert (
        "encoder/_embedding_layer/embeddings/.ATTRIBUTES/VARIABLE_VALUE",
        "embeddings/token_embedding/embeddings",
        (64, 128),
    ) in report.mapped
    out = _outputs(backbone, x)
    real = x["padding_mask"].astype(bool)
    assert np.abs(out["sequence_output"][real] - ref["sequence_output"].numpy()[real]).max() <= 1e-5


def test_a_config_with_fewer_layers_than_the_checkpoint_is_refused(tmp_path):
    """tf.train.Checkpoint.read fills what the rebuilt encoder has and leaves the rest unread:
    num_layers=1 for a 2-layer checkpoint gave a 1-layer model, 'ok', without a word."""
    encoder, _, _ = _encoder("bert_tiny", vocabulary_size=64)
    tf.train.Checkpoint(encoder=encoder).save(str(tmp_path / "ckpt"))
    _write_config(tmp_path, encoder, num_layers=1)
    with pytest.raises(
        ValueError,
        match=r"ckpt-1 holds 39 variables under 'encoder' but the encoder built from "
        r".*encoder_config.json has 23 \(num_layers=1, hidden_size=128\)",
    ):
        convert_checkpoint(str(tmp_path), format="model-garden")
    _write_config(tmp_path, encoder, hidden_size=64, inner_dim=128, num_attention_heads=2)
    with pytest.raises(
        ValueError,
        match=r"ckpt-1 does not fit the encoder built from .*encoder_config.json "
        r"\(Received incompatible tensor",
    ):
        convert_checkpoint(str(tmp_path), format="model-garden")


def test_model_garden_release_layout_and_model_key(tmp_path):
    """Model Garden's converter (tf2_encoder_checkpoint_converter's convert_checkpoint) writes
    tf.train.Checkpoint(model=encoder) to bert_model.ckpt with no 'checkpoint' state file; that was
    'No TF2 checkpoint', and the model= key an AssertionError traceback."""
    encoder, x, ref = _encoder("bert_tiny", vocabulary_size=64)
    tf.train.Checkpoint(model=encoder).write(str(tmp_path / "bert_model.ckpt"))
    _write_config(tmp_path, encoder)
    backbone, report = convert_checkpoint(str(tmp_path), format="model-garden")
    real = x["padding_mask"].astype(bool)
    out = _outputs(backbone, x)
    assert np.abs(out["sequence_output"][real] - ref["sequence_output"].numpy()[real]).max() <= 1e-5
    assert report.source.endswith("bert_model.ckpt") and len(report.mapped) == 39
    tf.train.Checkpoint(other=encoder).write(str(tmp_path / "bert_model.ckpt"))
    with pytest.raises(
        ValueError,
        match=r"bert_model.ckpt holds no encoder: its top-level objects are \['other'\], "
        r"and Model Garden saves the encoder as 'encoder' or 'model'",
    ):
        convert_checkpoint(str(tmp_path), format="model-garden")
    tf.train.Checkpoint(encoder=encoder).write(str(tmp_path / "second.ckpt"))
    with pytest.raises(
        ValueError,
        match=r"2 TF checkpoints in .* \(bert_model.ckpt, second.ckpt\) and no 'checkpoint' "
        r"file to say which is latest: keep one",
    ):
        convert_checkpoint(str(tmp_path), format="model-garden")


def test_model_garden_mismatch_is_reported():
    encoder, _, _ = _encoder("bert_tiny", vocabulary_size=64)
    from keras_bert_impl.checkpoints.model_garden import translate_model_garden_names
    from keras_bert_impl.checkpoints.weight_map import assign_weights, backbone_variables

    arrays, _ = translate_model_garden_names({w.name: w.numpy() for w in encoder.weights})
    del arrays["bert/encoder/layer_1/output/LayerNorm/beta"]
    target = kb.BertBackbone(**dict(kb.BERT_PRESETS["bert_tiny"], vocabulary_size=64))
    before = target.embeddings.token_embedding.embeddings.numpy().copy()
    with pytest.raises(
        CheckpointMismatchError,
        match="Missing from the checkpoint \\(1\\): bert/encoder/layer_1/output/LayerNorm/beta",
    ):
        assign_weights(backbone_variables(target), arrays, "test")
    np.testing.assert_array_equal(
        target.embeddings.token_embedding.embeddings.numpy(), before
    )  # nothing half-loaded


def test_other_encoders_and_an_unbuilt_one_are_named():
    """An AlbertEncoder (one layer shared across depth) was an AttributeError traceback, a
    MobileBERTEncoder a KeyError, an encoder never called (no weights yet) an AttributeError."""
    ids = np.ones((1, 4), "int32")
    inputs = dict(input_word_ids=ids, input_mask=ids, input_type_ids=ids * 0)
    albert = networks.AlbertEncoder(
        vocab_size=50,
        embedding_width=16,
        hidden_size=16,
        num_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_sequence_length=16,
    )
    mobile = networks.MobileBERTEncoder(
        word_vocab_size=50,
        word_embed_size=8,
        max_sequence_length=16,
        num_blocks=1,
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=32,
    )
    for encoder in (albert, mobile):
        encoder(inputs)
        with pytest.raises(
            ValueError,
            match=rf"{type(encoder).__name__} is not a BERT encoder: "
            r"load_model_garden_encoder copies a BertEncoder or BertEncoderV2",
        ):
            load_model_garden_encoder(encoder)
    unbuilt = networks.BertEncoderV2(
        vocab_size=50,
        hidden_size=16,
        num_layers=1,
        num_attention_heads=2,
        inner_dim=32,
        max_sequence_length=16,
    )
    with pytest.raises(ValueError, match=r"The BertEncoderV2 has no weights yet: call it once on inputs"):
        load_model_garden_encoder(unbuilt)


def test_model_garden_tf2_release_with_bert_config(tmp_path):
    """Model Garden's TF2 BERT checkpoints (tf2_encoder_checkpoint_converter) come as bert_config.json,
    bert_model.ckpt.* of tf.train.Checkpoint(encoder=...) around the encoder that
    bert_models.get_transformer_encoder builds from that config (a functional BertEncoder), and
    vocab.txt. --format google said it is a TF2 checkpoint; --format model-garden wanted an
    encoder_config.json the release does not have."""
    from official.legacy.bert import bert_models, configs

    google_config = dict(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,
        type_vocab_size=2,
        hidden_act="gelu",
        initializer_range=0.5,
    )
    encoder = bert_models.get_transformer_encoder(configs.BertConfig.from_dict(google_config))
    x = random_inputs(batch=2, length=9, vocabulary_size=64, pad_last=3, seed=2)
    mg_inputs = dict(
        input_word_ids=x["token_ids"], input_mask=x["padding_mask"], input_type_ids=x["segment_ids"]
    )
    ref = encoder(mg_inputs, training=False)
    tf.train.Checkpoint(encoder=encoder).write(str(tmp_path / "bert_model.ckpt"))
    (tmp_path / "bert_config.json").write_text(json.dumps(google_config))
    (tmp_path / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(59)]) + "\n"
    )
    with pytest.raises(
        ValueError,
        match=r"object-based TF2 checkpoint .* --format model-garden \(it reads "
        r"this bert_config.json",
    ):
        convert_checkpoint(str(tmp_path), format="google")
    backbone, report = convert_checkpoint(str(tmp_path), format="model-garden")
    assert report.ok and len(report.mapped) == 39 and backbone.activation == "gelu_approximate"
    # `kbert finetune --init` (no --format) tells it by its checkpoint, not only its config file's name;
    # it tried the google format and failed with the message above.
    model, description = load_init(str(tmp_path))
    assert description.startswith(f"model-garden checkpoint {tmp_path} (39 tensors imported")
    np.testing.assert_array_equal(
        model.token_embedding.embeddings.numpy(), backbone.token_embedding.embeddings.numpy()
    )
    assert backbone.vocabulary[5] == "w0" and backbone.lowercase is True
    out = _outputs(backbone, x)
    real = x["padding_mask"].astype(bool)
    seq = ref[0] if isinstance(ref, (list, tuple)) else ref["sequence_output"]
    assert np.abs(out["sequence_output"][real] - np.asarray(seq)[real]).max() <= 1e-5


def test_a_pretrainer_checkpoint_gives_its_encoder(tmp_path):
    """Model Garden's pretraining saves tf.train.Checkpoint(model=BertPretrainerV2(...)): the encoder
    sits at model/encoder_network, beside the MLM head. It was read as if 'model' were the encoder:
    '45 variables under 'model' but the encoder ... has 39'."""
    from official.nlp.modeling import models

    encoder, x, ref = _encoder("bert_tiny", vocabulary_size=64)
    pretrainer = models.BertPretrainerV2(encoder_network=encoder)
    ids = np.ones((1, 4), "int32")
    pretrainer(dict(input_word_ids=ids, input_mask=ids, input_type_ids=ids * 0, masked_lm_positions=ids))
    tf.train.Checkpoint(model=pretrainer).save(str(tmp_path / "ckpt"))
    _write_config(tmp_path, encoder)
    backbone, report = convert_checkpoint(str(tmp_path), format="model-garden")
    real = x["padding_mask"].astype(bool)
    assert (
        np.abs(_outputs(backbone, x)["sequence_output"][real] - ref["sequence_output"].numpy()[real]).max()
        <= 1e-5
    )
    # Under the checkpoint's own keys: the word embeddings, shared
    # with the MLM head, are saved under its path.
    keys = {name for name, _ in tf.train.list_variables(report.source)}
    mapped = {c for c, _, _ in report.mapped}
    assert (
        len(mapped) == 39
        and mapped <= keys
        and len([c for c in mapped if not c.startswith("model/encoder_network/")]) == 1
    )
    assert not mapped & {name for name, _ in report.ignored}
    assert any(
        name.startswith("model/masked_lm/") and why == "not the encoder" for name, why in report.ignored
    )
