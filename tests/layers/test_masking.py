"""The one home of masked reductions: attention masks, additive biases, masked mean and max."""

import numpy as np
from keras import ops

import keras_bert_impl as kb
from keras_bert_impl.layers.masking import MASK_VALUE, mask_bias, masked_max, masked_mean, merge_masks
from tests.harness import random_inputs, tiny_backbone_config

VALUES = np.arange(2 * 3 * 2, dtype="float32").reshape(2, 3, 2)  # [B, T, H]


def test_masked_mean_and_max_match_numpy_and_an_all_padding_row_gives_zeros():
    mask = np.array([[1, 1, 0], [0, 0, 0]], "int32")
    mean = ops.convert_to_numpy(masked_mean(VALUES, mask))
    np.testing.assert_allclose(mean[0], VALUES[0, :2].mean(axis=0))
    np.testing.assert_array_equal(mean[1], [0.0, 0.0])  # no real token: zeros, not NaN
    maximum = ops.convert_to_numpy(masked_max(VALUES, mask))
    np.testing.assert_allclose(maximum[0], VALUES[0, :2].max(axis=0))
    assert np.all(maximum[1] < MASK_VALUE / 2)


def test_mask_bias_and_merged_masks():
    np.testing.assert_array_equal(ops.convert_to_numpy(mask_bias(np.array([1, 0]))), [0.0, MASK_VALUE])
    merged = ops.convert_to_numpy(merge_masks(np.array([[1, 1, 0]]), None, True, 3, 3))  # [1, 3, 3]
    np.testing.assert_array_equal(merged[0], [[1, 0, 0], [1, 1, 0], [1, 1, 0]])
    assert merge_masks(None, None, False, 3, 3) is None


def test_classifier_and_embedder_pool_an_all_padding_row_the_same_way():
    x = random_inputs(batch=2, length=5)
    x["padding_mask"][1] = 0
    backbone = kb.BertBackbone(**tiny_backbone_config())
    sequence = backbone(x)["sequence_output"]
    embedder = kb.BertEmbedder(backbone, pooling="mean", normalize=False)
    expected = ops.convert_to_numpy(masked_mean(sequence, x["padding_mask"]))
    got = embedder.predict(x, verbose=0)["embeddings"]
    np.testing.assert_allclose(got, expected, atol=1e-6)
    np.testing.assert_array_equal(got[1], np.zeros(8))
    classifier = kb.BertClassifier(backbone, num_classes=2, pooling="mean", dropout=0.0)
    assert np.all(np.isfinite(classifier.predict(x, verbose=0)["logits"]))
