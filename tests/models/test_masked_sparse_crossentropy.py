"""MaskedSparseCrossentropy equals Model Garden's weighted sparse cross-entropy (Google's
masked-LM loss), and round-trips."""

import keras
import numpy as np
import pytest
from official.nlp.modeling.losses import weighted_sparse_categorical_crossentropy as model_garden

from keras_bert_impl.models.masked_sparse_crossentropy import MaskedSparseCrossentropy


def _batch(seed, real_share):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(8, 20, 300)).astype("float32")  # [B, P, V]
    labels = rng.integers(0, 300, (8, 20))  # [B, P]
    weights = (rng.random((8, 20)) < real_share).astype("float32")  # 0 on padded prediction slots
    return labels, logits, weights


@pytest.mark.parametrize("real_share", [0.45, 0.9])
def test_equals_model_garden_weighted_loss(real_share):
    labels, logits, weights = _batch(0, real_share)
    ours = float(MaskedSparseCrossentropy()(labels, logits, sample_weight=weights))
    theirs = float(model_garden.loss(labels, logits, weights=weights, from_logits=True))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    # What it replaces: Keras' own reduction divides by all B * P slots, real or not.
    keras_default = float(
        keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits, sample_weight=weights)
    )
    np.testing.assert_allclose(keras_default, theirs * weights.mean(), rtol=1e-5)


def test_without_weights_and_with_no_real_position():
    labels, logits, weights = _batch(1, 0.5)
    np.testing.assert_allclose(
        float(MaskedSparseCrossentropy()(labels, logits)),
        float(model_garden.loss(labels, logits, from_logits=True)),
        rtol=1e-6,
    )
    assert float(MaskedSparseCrossentropy()(labels, logits, sample_weight=np.zeros_like(weights))) == 0.0


def test_probabilities_and_config_round_trip():
    labels, logits, weights = _batch(2, 0.7)
    probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))
    loss = MaskedSparseCrossentropy(from_logits=False, name="mlm")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert (
        isinstance(restored, MaskedSparseCrossentropy)
        and restored.name == "mlm"
        and restored.from_logits is False
    )
    np.testing.assert_allclose(
        float(restored(labels, probabilities, sample_weight=weights)),
        float(model_garden.loss(labels, probabilities, weights=weights)),
        rtol=1e-5,
    )


def test_from_logits_must_be_bool():
    with pytest.raises(ValueError, match="from_logits='yes'"):
        MaskedSparseCrossentropy(from_logits="yes")
