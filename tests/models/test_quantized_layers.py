"""Keras' own `model.quantize("int8")` on our models: right numbers, and a .keras file that
loads back quantized (models/quantized_layers.py)."""

import os

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from tests.harness import quantize, random_inputs, save_and_reload, tiny_backbone_config

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "minilm_reference.npz")


def _quantized_paths(model):
    return sorted(
        layer.path for layer in model._flatten_layers(include_self=False) if layer.quantization_mode
    )


def _copy(backbone):
    """A copy of a backbone (the session's MiniLM is shared: it is never quantized in place)."""
    twin = kb.BertBackbone.from_config(backbone.get_config())
    twin.set_weights(backbone.get_weights())
    twin.set_vocabulary(backbone.vocabulary, backbone.lowercase)
    return twin


def _out(model, x, key):
    """`model`'s output `key` for the one small batch `x`, called eagerly: predict() traced a
    function for each model and each batch of one call (the 6-layer int8 MiniLM's three cost
    most of its test)."""
    return np.asarray(model(x, training=False)[key])


def test_int8_minilm_matches_transformers_and_loads_back(minilm):
    """Against PyTorch + transformers' fp32 sentence embeddings (tests/fixtures): int8 costs
    little (the project's int8 bar, 0.98, as for the TFLite int8 exports). Before the fix the
    attention read the int8 kernels as if they were float ones: cosines about 0."""
    ref = np.load(FIXTURE)
    x = {
        "token_ids": ref["input_ids"],
        "segment_ids": ref["token_type_ids"],
        "padding_mask": ref["attention_mask"],
    }
    backbone = _copy(minilm)
    quantize(backbone, "int8")
    assert len(_quantized_paths(backbone)) == 6 * 6 + 3  # 6 Dense per block; 2 embeddings, pooler
    embeddings = _out(kb.BertEmbedder(backbone, pooling="mean", normalize=True), x, "embeddings")
    want = ref["sentence_embedding"]
    cosine = (embeddings * want).sum(-1) / np.linalg.norm(want, axis=-1)
    print(f"int8 MiniLM vs transformers fp32: min cosine {cosine.min():.4f}, mean {cosine.mean():.4f}")
    assert cosine.min() >= 0.98 and cosine.mean() >= 0.99, cosine

    loaded = save_and_reload(backbone)
    assert _quantized_paths(loaded) == _quantized_paths(backbone)
    assert loaded.embeddings.token_embedding.embeddings.dtype == "int8"
    assert loaded.vocabulary == minilm.vocabulary
    np.testing.assert_array_equal(_out(loaded, x, "sequence_output"), _out(backbone, x, "sequence_output"))


def test_int8_classifier_head_round_trips():
    backbone = kb.BertBackbone(**tiny_backbone_config())
    model = kb.BertClassifier(backbone, num_classes=3)
    x = random_inputs()
    fp32 = _out(model, x, "logits")
    quantize(model, "int8")
    int8 = _out(model, x, "logits")
    assert not np.array_equal(int8, fp32)
    np.testing.assert_allclose(int8, fp32, atol=0.05 * np.abs(fp32).max())

    config = model.get_config()
    assert list(config["quantized_layers"]) == ["logits"]  # the backbone's are in its own config
    assert len(config["backbone"]["config"]["quantized_layers"]) == 2 * 6 + 3
    loaded = save_and_reload(model)
    assert isinstance(loaded, kb.BertClassifier) and _quantized_paths(loaded) == _quantized_paths(model)
    np.testing.assert_array_equal(_out(loaded, x, "logits"), int8)
    # An unquantized model's config is unchanged.
    assert (
        "quantized_layers" not in kb.BertClassifier(kb.BertBackbone(**tiny_backbone_config()), 3).get_config()
    )


def test_int8_pretrainer_masked_lm_uses_the_dequantized_tied_embedding():
    backbone = kb.BertBackbone(**tiny_backbone_config())
    pretrainer = kb.BertPretrainer(backbone)
    x = random_inputs()
    x["mask_positions"] = np.array([[1, 2], [0, 3], [4, 5]], "int32")
    fp32 = _out(pretrainer, x, "mlm_logits")
    quantize(pretrainer, "int8")
    assert backbone.token_embedding.embeddings.dtype == "int8"
    int8 = _out(pretrainer, x, "mlm_logits")
    np.testing.assert_allclose(int8, fp32, atol=0.05 * np.abs(fp32).max())
    np.testing.assert_array_equal(_out(save_and_reload(pretrainer), x, "mlm_logits"), int8)


def test_masked_lm_refuses_a_token_embedding_it_cannot_dequantize():
    pretrainer = kb.BertPretrainer(
        kb.BertBackbone(**tiny_backbone_config(hidden_dim=16, intermediate_dim=32))
    )
    quantize(pretrainer, "int4")
    x = random_inputs()
    x["mask_positions"] = np.array([[1], [0], [4]], "int32")
    with pytest.raises(ValueError, match="quantized with mode 'int4'.*Quantize with mode='int8'"):
        pretrainer(x)


def test_quantized_layers_naming_a_missing_layer_are_refused():
    config = kb.BertBackbone(**tiny_backbone_config()).get_config()
    config["quantized_layers"] = {"transformer_layer_7/attention/query": "int8_from_float32"}
    with pytest.raises(ValueError, match=r"does not have: \['transformer_layer_7/attention/query'\]"):
        kb.BertBackbone.from_config(config)
    config["quantized_layers"] = ["embeddings/token_embedding"]
    with pytest.raises(ValueError, match="must map layer paths to dtype policies"):
        kb.BertBackbone.from_config(config)


def test_quantized_policy_keeps_working_through_keras_deserialize():
    """The policies are stored as Keras serializes them, and a bare policy name works too."""
    backbone = kb.BertBackbone(**tiny_backbone_config())
    quantize(backbone, "int8")
    config = keras.saving.serialize_keras_object(backbone)
    rebuilt = keras.saving.deserialize_keras_object(config)
    assert _quantized_paths(rebuilt) == _quantized_paths(backbone)
    plain = backbone.get_config()
    plain["quantized_layers"] = {"pooler/dense": "int8_from_float32"}
    assert _quantized_paths(kb.BertBackbone.from_config(plain)) == ["pooler/dense"]
