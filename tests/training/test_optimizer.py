"""BERT's AdamW: schedule shape, no decay on biases/LayerNorm, clipping."""

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.training import WarmupPolynomialDecay, create_optimizer
from tests.harness import tiny_backbone_config


def test_schedule_warmup_then_keras_polynomial_decay():
    schedule = WarmupPolynomialDecay(
        1e-3, decay_steps=100, warmup_steps=10, end_learning_rate=1e-5, power=2.0
    )
    # Warm-up is linear from 0.
    for step in (0, 1, 5, 9):
        assert float(schedule(step)) == pytest.approx(1e-3 * step / 10, rel=1e-6)
    # After warm-up: Keras' own PolynomialDecay, started at the end of warm-up.
    reference = keras.optimizers.schedules.PolynomialDecay(
        1e-3, decay_steps=90, end_learning_rate=1e-5, power=2.0
    )
    for step in (10, 11, 50, 99, 100, 150):
        assert float(schedule(step)) == pytest.approx(float(reference(step - 10)), rel=1e-5)
    again = WarmupPolynomialDecay.from_config(schedule.get_config())
    assert float(again(42)) == float(schedule(42))


def test_schedule_against_model_garden_and_google():
    # Model Garden's WarmUp over PolynomialDecay(num_train_steps), the schedule of Google's
    # optimization.py, counts the decay from step 0; ours starts it where warm-up ends.
    # Pinned: identical during warm-up, then theirs = ours * (1 - warmup / decay_steps).
    import tf_keras
    from official.nlp.optimization import WarmUp

    peak, total, warmup = 1e-3, 30000, 3000
    theirs = WarmUp(peak, tf_keras.optimizers.schedules.PolynomialDecay(peak, total, 0.0, power=1.0), warmup)
    ours = WarmupPolynomialDecay(peak, decay_steps=total, warmup_steps=warmup)
    for step in (1, 1500, 2999):
        assert float(ours(step)) == pytest.approx(float(theirs(step)), rel=1e-5)
    for step in (3000, 5000, 12000, 29000):
        assert float(theirs(step)) == pytest.approx(float(ours(step)) * (1 - warmup / total), rel=1e-5)
    assert float(ours(total)) == float(theirs(total)) == 0.0


def test_schedule_rejects_bad_warmup():
    with pytest.raises(ValueError, match="warmup_steps=100"):
        WarmupPolynomialDecay(1e-3, decay_steps=100, warmup_steps=100)


def test_weight_decay_skips_biases_and_layer_norm():
    model = kb.BertClassifier(kb.BertBackbone(**tiny_backbone_config()), num_classes=2)
    optimizer = create_optimizer(0.1, train_steps=10, warmup_steps=0, weight_decay=0.5, global_clipnorm=None)
    variables = model.trainable_variables
    before = [v.numpy().copy() for v in variables]
    optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in variables])
    lr = float(optimizer.learning_rate)  # the schedule's rate at the step just taken
    for v, old in zip(variables, before):
        name = v.path
        if any(key in name for key in ("bias", "gamma", "beta", "layer_norm")):
            np.testing.assert_array_equal(v.numpy(), old, err_msg=name)
        else:  # decoupled decay with a zero gradient: w <- w * (1 - lr * wd)
            np.testing.assert_allclose(v.numpy(), old * (1 - 0.1 * 0.5), rtol=1e-5, err_msg=name)
    assert lr > 0


def test_global_norm_clipping():
    optimizer = create_optimizer(1.0, train_steps=10, warmup_steps=0, global_clipnorm=1.0, weight_decay=0.0)
    assert optimizer.global_clipnorm == 1.0
