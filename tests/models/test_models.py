"""Every model through the shared harness, masks end to end, presets, bad input."""

import json

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from tests.harness import random_inputs, run_model_test, tiny_backbone_config

X = random_inputs()
B = len(X["token_ids"])


def backbone(**kw):
    return kb.BertBackbone(**tiny_backbone_config(**kw))


def head_backbone():
    """The backbone of the heads' run_model_test: one layer, as what it checks of a head does not
    depend on depth, and it traces each layer in every export and fit it runs (a third less time
    than two layers)."""
    return backbone(num_layers=1)


def test_backbone_outputs_and_harness():
    bb = backbone(return_hidden_states=True, return_attention_scores=True)
    out = bb(X)
    assert out["sequence_output"].shape == (3, 7, 8)
    assert out["pooled_output"].shape == (3, 8)
    assert out["hidden_states"].shape == (3, 3, 7, 8)
    assert out["attention_probs"].shape == (3, 2, 2, 7, 7)
    np.testing.assert_array_equal(out["hidden_states"][:, -1].numpy(), out["sequence_output"].numpy())


def test_layer_outputs_in_a_second_graph_share_the_weights_and_save_nothing():
    plain = backbone(dropout=0.0)
    full = backbone(dropout=0.0, return_hidden_states=True, return_attention_scores=True)
    full.set_weights(plain.get_weights())
    config, layers = plain.get_config(), len(plain.layers)
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in X}
    outputs = plain.layer_outputs(inputs, return_attention_scores=True)
    second = keras.Model(
        inputs,
        {
            "hidden": keras.ops.stack(outputs["hidden_states"], axis=1),
            "probs": keras.ops.stack(outputs["attention_probs"], axis=1),
        },
    )
    got, expected = second(X), full(X)
    np.testing.assert_allclose(got["hidden"], expected["hidden_states"], atol=1e-6)
    np.testing.assert_allclose(got["probs"], expected["attention_probs"], atol=1e-6)
    assert (
        plain.get_config() == config
        and len(plain.layers) == layers
        and sorted(plain.output) == ["pooled_output", "sequence_output"]
    )


def test_backbone_fit_save_mixed_precision():
    def make():
        bb = head_backbone()  # one layer, as for the heads: run_model_test's checks do not depend on depth
        bb.compile(optimizer="sgd", loss={"sequence_output": "mse", "pooled_output": "mse"})
        return bb

    run_model_test(
        make,
        X,
        {"sequence_output": np.ones((B, 7, 8), "float32"), "pooled_output": np.ones((B, 8), "float32")},
    )


@pytest.mark.slow  # about 20 s or more: trains and round-trips a classifier
def test_classifier():
    run_model_test(lambda: kb.BertClassifier(head_backbone(), num_classes=3), X, np.array([0, 2, 1]))


@pytest.mark.slow  # about 20 s or more: trains and round-trips a mean-pooling classifier
def test_classifier_mean_pooling():
    run_model_test(
        lambda: kb.BertClassifier(head_backbone(), num_classes=3, pooling="mean"), X, np.array([0, 2, 1])
    )
    model = kb.BertClassifier(head_backbone(), num_classes=3, pooling="mean", label_names=["a", "b", "c"])
    sequence = model.backbone.predict(X, verbose=0)["sequence_output"]  # [B, T, H]
    mask = X["padding_mask"][:, :, None].astype("float32")
    mean = (sequence * mask).sum(1) / mask.sum(1)  # only the unpadded tokens
    kernel, bias = model.output_dense.get_weights()
    np.testing.assert_allclose(model.predict(X, verbose=0)["logits"], mean @ kernel + bias, atol=1e-5)
    assert X["padding_mask"].min() == 0  # the batch has padding, so the mask matters
    with pytest.raises(
        ValueError, match=r"pooling must be one of \['pooled', 'mean'\]. Received: pooling='max'"
    ):
        kb.BertClassifier(head_backbone(), num_classes=3, pooling="max")
    with pytest.raises(ValueError, match=r"label_names must name each of the 3 classes"):
        kb.BertClassifier(head_backbone(), num_classes=3, label_names=["a", "b"])


@pytest.mark.slow  # about 20 s or more: trains and round-trips a multi-label classifier
def test_classifier_multi_label():
    y = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1]], "float32")
    run_model_test(lambda: kb.BertClassifier(head_backbone(), num_classes=3, multi_label=True), X, y)


def test_classifier_probabilities():
    out = kb.BertClassifier(backbone(), num_classes=3, activation="softmax").predict(X, verbose=0)
    np.testing.assert_allclose(out["probabilities"].sum(-1), 1.0, atol=1e-5)


@pytest.mark.slow  # about 20 s or more: trains and round-trips a token classifier
def test_token_classifier():
    run_model_test(
        lambda: kb.BertTokenClassifier(head_backbone(), num_classes=4),
        X,
        X["token_ids"] % 4,
        X["padding_mask"],
    )


@pytest.mark.slow  # about 20 s or more: trains and round-trips a span labeler
def test_span_labeler():
    y = {"start_logits": np.array([1, 2, 3]), "end_logits": np.array([2, 4, 3])}
    model = run_model_test(lambda: kb.BertSpanLabeler(head_backbone()), X, y)
    out = model.predict(X, verbose=0)
    assert np.all(out["start_logits"][0, -2:] < -1e8)  # padding is never a span boundary


@pytest.mark.parametrize("pooling", ["cls", "mean", "max"])
def test_embedder(pooling):
    bb = backbone(return_hidden_states=True)
    model = kb.BertEmbedder(bb, pooling=pooling, layer_index=1)
    emb = model.predict(X, verbose=0)["embeddings"]
    np.testing.assert_allclose(np.linalg.norm(emb, axis=-1), 1.0, atol=1e-5)
    hidden = bb.predict(X, verbose=0)["hidden_states"][:, 1]
    m = X["padding_mask"][:, :, None].astype(bool)
    ref = {
        "cls": hidden[:, 0],
        "mean": (hidden * m).sum(1) / m.sum(1),
        "max": np.where(m, hidden, -np.inf).max(1),
    }[pooling]
    ref = ref / np.linalg.norm(ref, axis=-1, keepdims=True)
    np.testing.assert_allclose(emb, ref, atol=1e-5)


@pytest.mark.slow  # about 20 s or more: trains and round-trips an embedder in mixed precision
def test_embedder_fit_save_mixed_precision():
    def make():
        model = kb.BertEmbedder(head_backbone(), pooling="mean")
        model.compile(optimizer="sgd", loss="mse")
        return model

    run_model_test(make, X, np.full((B, 8), 0.3, "float32"))


def test_embedder_needs_hidden_states_for_inner_layers():
    with pytest.raises(ValueError, match="return_hidden_states=True"):
        kb.BertEmbedder(backbone(), layer_index=1)


@pytest.mark.slow  # about 20 s or more: trains and round-trips a pretrainer
def test_pretrainer_ties_mlm_and_ignores_unmasked_positions():
    x = dict(X, mask_positions=np.array([[1, 2], [0, 3], [4, 5]], "int32"))
    y = {"mlm_logits": np.array([[3, 4], [5, 6], [7, 8]]), "nsp_logits": np.array([0, 1, 0])}
    w = {"mlm_logits": np.array([[1, 1], [1, 0], [0, 0]], "float32"), "nsp_logits": np.ones(3, "float32")}
    model = run_model_test(lambda: kb.BertPretrainer(head_backbone()), x, y, w)
    assert model.masked_lm_head.token_embedding is model.backbone.token_embedding
    reloaded = keras.saving.load_model(_save(model))
    assert reloaded.masked_lm_head.token_embedding is reloaded.backbone.token_embedding
    # A masked-out prediction slot does not move the loss, whatever its label.
    other = {"mlm_logits": y["mlm_logits"].copy(), "nsp_logits": y["nsp_logits"]}
    other["mlm_logits"][2] = [40, 41]
    a = model.evaluate(x, y, sample_weight=w, verbose=0, return_dict=True)
    b = model.evaluate(x, other, sample_weight=w, verbose=0, return_dict=True)
    assert a["mlm_logits_loss"] == pytest.approx(b["mlm_logits_loss"], abs=1e-6)


def _save(model):
    import os
    import tempfile

    path = os.path.join(tempfile.mkdtemp(), "m.keras")
    model.save(path)
    return path


def test_padding_does_not_change_unpadded_outputs():
    bb = backbone()
    rng = np.random.default_rng(3)
    ids = rng.integers(1, 50, (1, 5)).astype("int32")
    short = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}

    def pad(a, v):
        return np.concatenate([a, np.full((1, 4), v, "int32")], axis=1)

    # Garbage ids in the padded slots must not leak into the real positions.
    padded = {
        "token_ids": pad(ids, 17),
        "segment_ids": pad(short["segment_ids"], 1),
        "padding_mask": pad(short["padding_mask"], 0),
    }
    a, b = bb(short), bb(padded)
    np.testing.assert_allclose(a["sequence_output"].numpy(), b["sequence_output"].numpy()[:, :5], atol=1e-6)
    np.testing.assert_allclose(a["pooled_output"].numpy(), b["pooled_output"].numpy(), atol=1e-6)


def test_vocabulary_travels_in_keras_file():
    bb = backbone()
    vocab = [f"tok{i}" for i in range(50)]
    bb.set_vocabulary(vocab, lowercase=False)
    reloaded = keras.saving.load_model(_save(kb.BertClassifier(bb, num_classes=2)))
    assert reloaded.backbone.vocabulary == vocab and reloaded.backbone.lowercase is False


# --- presets ------------------------------------------------------------------


def test_preset_table():
    assert len(kb.BERT_PRESETS) == 25
    assert (
        kb.BERT_PRESETS["bert_tiny"]["num_layers"] == 2 and kb.BERT_PRESETS["bert_tiny"]["hidden_dim"] == 128
    )
    assert (
        kb.BERT_PRESETS["bert_medium"]["num_layers"] == 8
        and kb.BERT_PRESETS["bert_medium"]["hidden_dim"] == 512
    )
    for cfg in kb.BERT_PRESETS.values():
        assert (
            cfg["num_heads"] == cfg["hidden_dim"] // 64 and cfg["intermediate_dim"] == 4 * cfg["hidden_dim"]
        )
    with pytest.raises(ValueError, match="bert_tiny"):
        kb.BertBackbone.from_preset("bert_huge")


def _param_count(name):
    c = kb.BERT_PRESETS[name]
    v, h, i, layers, p = (
        c["vocabulary_size"],
        c["hidden_dim"],
        c["intermediate_dim"],
        c["num_layers"],
        c["max_sequence_length"],
    )
    per_layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return (v + p + 2) * h + 2 * h + layers * per_layer + h * h + h


@pytest.mark.parametrize("name,published", [("bert_base", 110e6), ("bert_large", 340e6)])
@pytest.mark.slow  # about 20 s or more: builds every preset up to BERT-large
def test_preset_parameter_counts(name, published):
    count = kb.BertBackbone.from_preset(name).count_params()
    # The closed form of BERT's architecture (embeddings, L blocks, pooler).
    assert count == _param_count(name)
    # tf-models-official's BertEncoder with the same configuration, independently.
    from official.nlp.modeling import networks

    c = kb.BERT_PRESETS[name]
    reference = networks.BertEncoderV2(
        vocab_size=c["vocabulary_size"],
        hidden_size=c["hidden_dim"],
        num_layers=c["num_layers"],
        num_attention_heads=c["num_heads"],
        inner_dim=c["intermediate_dim"],
        max_sequence_length=c["max_sequence_length"],
        type_vocab_size=c["num_segments"],
        # Zeros: the count does not depend on the values, and drawing BERT-large's 335M truncated
        # normals was two thirds of the reference's time.
        initializer="zeros",
    )
    reference(
        dict(
            input_word_ids=np.zeros((1, 4), "int32"),
            input_mask=np.ones((1, 4), "int32"),
            input_type_ids=np.zeros((1, 4), "int32"),
        )
    )
    assert count == reference.count_params()
    print(
        f"{name}: {count:,} parameters, {count / published - 1:+.2%} vs the published {published / 1e6:.0f}M"
    )
    if name == "bert_base":
        assert abs(count / published - 1) <= 0.01


# --- bad input ----------------------------------------------------------------


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda x: {k: v for k, v in x.items() if k != "segment_ids"}, "missing keys \\['segment_ids'\\]"),
        (lambda x: dict(x, extra=x["token_ids"]), "unknown keys \\['extra'\\]"),
        (lambda x: dict(x, token_ids=x["token_ids"].astype("float32")), "must be an integer tensor"),
        (lambda x: dict(x, token_ids=x["token_ids"][0]), "rank 2"),
        (lambda x: dict(x, token_ids=x["token_ids"] + 50), "value [5-9][0-9], outside \\[0, 50\\)"),
        (lambda x: dict(x, segment_ids=x["segment_ids"] * 3), "value 3, outside \\[0, 2\\)"),
        (
            lambda x: {k: np.tile(v, (1, 3)) for k, v in x.items()},
            "sequence length 21, longer than max_sequence_length=16",
        ),
        (lambda x: [x["token_ids"]], "expects a dict"),
    ],
)
def test_bad_inputs_name_the_problem(change, message):
    with pytest.raises(ValueError, match=message):
        backbone()(change(X))


def test_bad_config_fields():
    config = backbone().get_config()
    with pytest.raises(
        ValueError, match="unknown fields \\['hiden_dim'\\], missing fields \\['hidden_dim'\\]"
    ):
        config["hiden_dim"] = config.pop("hidden_dim")
        kb.BertBackbone.from_config(json.loads(json.dumps(config)))
    with pytest.raises(ValueError, match="hidden_dim=10, num_heads=4"):
        kb.BertBackbone(**tiny_backbone_config(hidden_dim=10, num_heads=4))
    with pytest.raises(ValueError, match="backbone must be a keras_bert_impl.BertBackbone"):
        kb.BertClassifier("bert_tiny", num_classes=2)
