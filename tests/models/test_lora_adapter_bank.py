"""LoraAdapterBank: LoRA classifiers of one base over one backbone, each answering as its own
merged model (merge_lora), in batches that mix them; other bases refused in one line."""

import keras
import numpy as np
import pytest

from keras_bert_impl.models import BertBackbone, BertClassifier, merge_lora
from keras_bert_impl.models.lora_adapter_bank import LoraAdapterBank
from tests.harness import random_inputs, randomize_like_trained, tiny_backbone_config

# (LoRA settings, head) of the three adapters: other ranks, targets, poolings and activations.
_ADAPTERS = (
    (dict(rank=2), dict(num_classes=2)),
    (dict(rank=3, targets=["query", "intermediate", "dense"], alpha=6), dict(num_classes=3, pooling="mean")),
    (
        dict(rank=1, targets=["transformer_layer_1/attention/key", "output"]),
        dict(num_classes=2, activation="softmax"),
    ),
)


def _lora_classifier(lora, head, base_seed=0, seed=1):
    keras.utils.set_random_seed(base_seed)
    backbone = BertBackbone(**tiny_backbone_config())
    backbone.enable_lora(**lora)
    return randomize_like_trained(BertClassifier(backbone, **head), seed=seed, heads=("logits",))


@pytest.fixture(scope="module")
def classifiers():
    return [_lora_classifier(lora, head, seed=i + 1) for i, (lora, head) in enumerate(_ADAPTERS)]


@pytest.fixture(scope="module")
def bank(classifiers):
    return LoraAdapterBank(iter(classifiers))


def _merged_answer(classifier, inputs):
    outputs = merge_lora(classifier)(inputs)
    return {k: keras.ops.convert_to_numpy(v) for k, v in outputs.items()}


def test_each_adapter_answers_as_its_merged_classifier(classifiers, bank):
    inputs = random_inputs(batch=3, length=7)
    for index, classifier in enumerate(classifiers):
        (answer,) = bank.run([(index, inputs)])
        expected = _merged_answer(classifier, inputs)
        assert sorted(answer) == sorted(expected)
        for key in expected:
            np.testing.assert_allclose(answer[key], expected[key], atol=1e-5, rtol=0)


def test_a_batch_mixing_adapters_answers_each_request_as_alone(classifiers, bank):
    parts = [random_inputs(batch=b, length=7, seed=s) for b, s in ((2, 1), (1, 2), (3, 3), (2, 4))]
    requests = list(zip((2, 0, 1, 2), parts))
    mixed = bank.run(requests)
    for (adapter, inputs), answer in zip(requests, mixed):
        (alone,) = bank.run([(adapter, inputs)])
        for key in alone:
            np.testing.assert_allclose(answer[key], alone[key], atol=1e-5, rtol=0)
            np.testing.assert_allclose(
                answer[key], _merged_answer(classifiers[adapter], inputs)[key], atol=1e-5, rtol=0
            )


def test_the_base_is_held_once_and_adapters_add_only_their_matrices(classifiers, bank):
    base = sum(int(np.prod(v.shape)) for v in bank.backbone.weights)
    assert base == sum(
        int(np.prod(v.shape)) for v in classifiers[0].backbone.weights if "lora_kernel" not in v.path
    )
    assert not any(getattr(layer, "lora_enabled", False) for layer in bank.backbone._flatten_layers())


def test_adapters_of_another_base_are_refused_in_one_line(classifiers):
    other = _lora_classifier(dict(rank=2), dict(num_classes=2), base_seed=5)
    with pytest.raises(ValueError) as error:
        LoraAdapterBank([classifiers[0], other])
    message = str(error.value)
    assert "\n" not in message
    assert "classifiers[1] was not made from the same base as classifiers[0] (weight " in message


def test_a_classifier_without_lora_is_refused(classifiers):
    keras.utils.set_random_seed(0)
    plain = BertClassifier(BertBackbone(**tiny_backbone_config()), num_classes=2)
    with pytest.raises(ValueError, match=r"classifiers\[1\]: a BertClassifier without LoRA adapters"):
        LoraAdapterBank([classifiers[0], plain])


def test_an_adapter_index_out_of_range_is_refused(bank):
    with pytest.raises(ValueError, match=r"adapter must be an index in \[0, 3\)\. Received: 3"):
        bank.run([(3, random_inputs())])
