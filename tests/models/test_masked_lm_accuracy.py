"""MaskedLMAccuracy equals Keras' SparseCategoricalAccuracy (weighted), and round-trips."""

import keras
import numpy as np

from keras_bert_impl.models.masked_lm_accuracy import MaskedLMAccuracy


def test_equals_keras_sparse_categorical_accuracy():
    rng = np.random.default_rng(0)
    for _ in range(5):
        logits = rng.normal(size=(8, 20, 300)).astype("float32")  # continuous: no exact ties
        labels = rng.integers(0, 300, (8, 20))
        # Make about half the labels the argmax, so accuracy is far from 0 and 1.
        hit = rng.random((8, 20)) < 0.5
        labels = np.where(hit, logits.argmax(-1), labels)
        weights = (rng.random((8, 20)) < 0.8).astype("float32")  # padded prediction slots weigh 0
        ours, theirs = MaskedLMAccuracy(), keras.metrics.SparseCategoricalAccuracy()
        ours.update_state(labels, logits, sample_weight=weights)
        theirs.update_state(labels, logits, sample_weight=weights)
        assert 0.3 < float(theirs.result()) < 0.8
        np.testing.assert_allclose(float(ours.result()), float(theirs.result()), rtol=0, atol=1e-7)


def test_config_round_trip():
    metric = MaskedLMAccuracy(name="accuracy")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(metric))
    assert isinstance(restored, MaskedLMAccuracy) and restored.name == "accuracy"
