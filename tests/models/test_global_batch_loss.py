"""GlobalBatchLoss equals the Keras loss it wraps on one device (the exactness under a
strategy is tests/training/test_strategy.py's), round-trips, and refuses other reductions."""

import keras
import numpy as np
import pytest

from keras_bert_impl.models.global_batch_loss import GlobalBatchLoss
from keras_bert_impl.training import AllReplicaLossScaleOptimizer, create_optimizer


@pytest.mark.parametrize("weighted", [False, True])
def test_equals_the_wrapped_keras_losses(weighted):
    rng = np.random.default_rng(0)
    weights = rng.random(6).astype("float32") if weighted else None
    labels, logits = rng.integers(0, 3, 6), rng.normal(size=(6, 3)).astype("float32")
    sparse = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    np.testing.assert_allclose(
        float(GlobalBatchLoss(sparse)(labels, logits, sample_weight=weights)),
        float(sparse(labels, logits, sample_weight=weights)),
        rtol=1e-6,
    )
    multi_hot = (rng.random((6, 3)) < 0.5).astype("float32")
    binary = keras.losses.BinaryCrossentropy(from_logits=True)
    np.testing.assert_allclose(
        float(GlobalBatchLoss(binary)(multi_hot, logits, sample_weight=weights)),
        float(binary(multi_hot, logits, sample_weight=weights)),
        rtol=1e-6,
    )


def test_float16_predictions_are_reduced_in_float32():
    labels, logits = np.array([0, 1]), np.array([[30.0, -30.0], [0.0, 0.0]], "float16")
    loss = GlobalBatchLoss(keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    value = loss(labels, logits)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    np.testing.assert_allclose(float(value), np.log(2.0) / 2, rtol=1e-5)


def test_config_round_trip():
    loss = GlobalBatchLoss(keras.losses.BinaryCrossentropy(from_logits=True, label_smoothing=0.1))
    copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert isinstance(copy, GlobalBatchLoss) and isinstance(copy.loss, keras.losses.BinaryCrossentropy)
    assert copy.loss.get_config() == loss.loss.get_config() and copy.name == loss.name


def test_other_reductions_and_non_losses_are_refused():
    with pytest.raises(ValueError, match="reduction='sum'"):
        GlobalBatchLoss(keras.losses.SparseCategoricalCrossentropy(reduction="sum"))
    with pytest.raises(ValueError, match="Received: loss='mse'"):
        GlobalBatchLoss("mse")


def test_loss_scale_optimizer_round_trips():
    optimizer = AllReplicaLossScaleOptimizer(create_optimizer(1e-3, train_steps=10, warmup_steps=0))
    copy = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(copy, AllReplicaLossScaleOptimizer)
    assert type(copy.inner_optimizer) is type(optimizer.inner_optimizer)
