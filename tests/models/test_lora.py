"""LoRA on BertBackbone (Keras' Dense.enable_lora): targets, freezing, config and .keras round trip."""

import keras
import numpy as np
import pytest

from keras_bert_impl.models import BertBackbone, BertClassifier
from tests.harness import assert_close, random_inputs, randomize_like_trained, tiny_backbone_config


def _backbone(**lora):
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(**tiny_backbone_config())
    if lora:
        backbone.enable_lora(**lora)
    return backbone


def _lora_paths(model):
    return sorted(v.path for v in model.trainable_variables)


def test_default_targets_are_query_and_value_and_nothing_else_trains():
    backbone = _backbone(rank=2)
    paths = _lora_paths(backbone)
    expected = sorted(
        f"transformer_layer_{i}/attention/{name}/lora_kernel_{ab}"
        for i in range(2)
        for name in ("query", "value")
        for ab in "ab"
    )
    assert paths == expected
    assert backbone.lora_settings == {"rank": 2, "alpha": 2, "targets": ["query", "value"]}
    a = next(v for v in backbone.trainable_variables if v.path.endswith("query/lora_kernel_a"))
    assert tuple(a.shape) == (8, 2)


def test_targets_by_name_and_by_path():
    backbone = _backbone(rank=3, targets=["intermediate", "transformer_layer_1/attention/key", "dense"])
    layers = sorted({p.rsplit("/", 1)[0] for p in _lora_paths(backbone)})
    assert layers == [
        "pooler/dense",
        "transformer_layer_0/feed_forward/intermediate",
        "transformer_layer_1/attention/key",
        "transformer_layer_1/feed_forward/intermediate",
    ]


def test_forward_starts_unchanged_and_adapters_change_it():
    plain = _backbone()
    inputs = random_inputs(vocabulary_size=50)
    before = plain(inputs)
    plain.enable_lora(rank=2)
    assert_close(plain(inputs), before)  # b starts at zero
    randomize_like_trained(plain)
    assert not np.allclose(plain(inputs)["pooled_output"], before["pooled_output"])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rank": 0}, "rank must be a positive integer. Received: rank=0"),
        ({"rank": -3}, "Received: rank=-3"),
        ({"rank": 2, "targets": ["query", "qkv"]}, "targets: 'qkv' names no Dense layer of the backbone"),
        ({"rank": 2, "targets": []}, "targets must be a non-empty list"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_value(kwargs, message):
    backbone = _backbone()
    trainable = _lora_paths(backbone)
    with pytest.raises(ValueError) as error:
        backbone.enable_lora(**kwargs)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert backbone.lora_settings is None and _lora_paths(backbone) == trainable


def test_enabled_twice_is_refused():
    backbone = _backbone(rank=2)
    with pytest.raises(ValueError, match="already enabled"):
        backbone.enable_lora(rank=4)


def test_classifier_trains_adapters_and_head(tmp_path):
    backbone = _backbone(rank=2)
    model = BertClassifier(backbone, num_classes=3)
    trainable = _lora_paths(model)
    assert [p for p in trainable if "lora_kernel" not in p] == ["logits/bias", "logits/kernel"]
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    inputs = random_inputs(vocabulary_size=50)
    frozen = {v.path: v.numpy().copy() for v in model.weights if not v.trainable}
    model.fit(inputs, np.array([0, 1, 2]), epochs=2, verbose=0)
    assert all(np.array_equal(frozen[v.path], v.numpy()) for v in model.weights if not v.trainable)
    # Both adapter halves moved: a alone gets no gradient while b is zero, so b moved first.
    moved = [v.path for v in model.trainable_variables if "lora_kernel_b" in v.path and np.any(v.numpy())]
    assert len(moved) == 4


def test_keras_file_round_trip_keeps_unmerged_kernels_and_adapters(tmp_path):
    model = BertClassifier(_backbone(rank=2, targets=["query", "value", "output"], alpha=4), num_classes=3)
    randomize_like_trained(model)
    inputs = random_inputs(vocabulary_size=50)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.backbone.lora_settings == {"rank": 2, "alpha": 4, "targets": ["query", "value", "output"]}
    assert len(loaded.weights) == len(model.weights)
    for saved, restored in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(saved.numpy(), restored.numpy(), err_msg=saved.path)
    assert _lora_paths(loaded) == _lora_paths(model)
    # Called eagerly on the one batch (predict() traced a function per model).
    assert_close(loaded(inputs, training=False), model(inputs, training=False))


def test_bare_backbone_keras_file_round_trip(tmp_path):
    backbone = _backbone(rank=3, targets=["key", "attention_output"])
    backbone.set_vocabulary([f"t{i}" for i in range(50)], lowercase=False)
    randomize_like_trained(backbone)
    path = str(tmp_path / "backbone.keras")
    backbone.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.lora_settings == backbone.lora_settings and loaded.vocabulary == backbone.vocabulary
    for saved, restored in zip(backbone.weights, loaded.weights):
        np.testing.assert_array_equal(saved.numpy(), restored.numpy(), err_msg=saved.path)
    assert _lora_paths(loaded) == _lora_paths(backbone)


def test_weights_file_round_trip(tmp_path):
    model = _backbone(rank=2)
    randomize_like_trained(model)
    path = str(tmp_path / "lora.weights.h5")
    model.save_weights(path)
    other = _backbone(rank=2)
    other.load_weights(path)
    for saved, restored in zip(model.weights, other.weights):
        np.testing.assert_array_equal(saved.numpy(), restored.numpy(), err_msg=saved.path)


def test_config_round_trip_rebuilds_lora():
    backbone = _backbone(rank=2, targets=["key"])
    copy = BertBackbone.from_config(backbone.get_config())
    assert copy.get_config() == backbone.get_config()
    assert _lora_paths(copy) == _lora_paths(backbone)


def test_bad_lora_config_is_one_line():
    config = {**_backbone(rank=2).get_config(), "lora": {"rank": 2}}
    with pytest.raises(ValueError, match="config field 'lora' must be"):
        BertBackbone.from_config(config)


def test_trainable_true_keeps_the_backbone_weights_frozen():
    # A head's functional constructor sets `trainable` from its config on load, on JAX too.
    backbone = _backbone(rank=2)
    adapters = _lora_paths(backbone)
    backbone.trainable = False
    assert backbone.trainable_variables == []
    backbone.trainable = True
    assert _lora_paths(backbone) == adapters


def test_target_names_are_the_dense_layers_a_backbone_builds():
    from keras_bert_impl.models import LORA_TARGET_NAMES

    backbone = _backbone()
    names = {layer.name for layer in backbone._flatten_layers() if isinstance(layer, keras.layers.Dense)}
    assert set(LORA_TARGET_NAMES) == names


@pytest.mark.parametrize("head", [False, True])
def test_merged_model_has_no_lora_and_answers_as_the_unmerged_one(head):
    from keras_bert_impl.models import merge_lora

    keras.utils.set_random_seed(0)
    backbone = BertBackbone(**tiny_backbone_config(), dropout=0.0)
    backbone.enable_lora(rank=2, targets=["query", "value", "intermediate", "dense"], alpha=8)
    backbone.set_vocabulary([f"t{i}" for i in range(50)], lowercase=True)
    model = BertClassifier(backbone, num_classes=3, label_names=["a", "b", "c"]) if head else backbone
    randomize_like_trained(model)
    merged = merge_lora(model)
    merged_backbone = getattr(merged, "backbone", merged)
    assert merged_backbone.lora_settings is None and "lora" not in merged_backbone.get_config()
    assert not any("lora" in v.path for v in merged.weights)
    assert len(merged.trainable_weights) == len(merged.weights)  # a plain model again
    assert merged_backbone.vocabulary == backbone.vocabulary
    if head:
        assert merged.label_names == ["a", "b", "c"]
    inputs = random_inputs(vocabulary_size=50)
    expected, got = model(inputs, training=False), merged(inputs, training=False)  # eagerly, one batch
    # The adapters are in the merged kernels: they differ from the frozen ones.
    query = next(v for v in merged.weights if v.path.endswith("transformer_layer_0/attention/query/kernel"))
    frozen = next(v for v in model.weights if v.path == query.path)
    assert not np.allclose(query.numpy(), frozen.numpy())
    assert_close(got, expected, atol=1e-5)


def test_merge_of_a_model_without_lora_is_refused():
    from keras_bert_impl.models import merge_lora

    with pytest.raises(ValueError, match="no LoRA adapters"):
        merge_lora(_backbone())
