"""OneDnnForms, TextPredictor's fp32 forward of a BertClassifier: the Keras model's outputs
within 1e-5 (both poolings, softmax and multi-label sigmoid heads, a pair's segments, padding,
with and without the fused LayerNorm), and on TensorFlow's oneDNN build every LayerNorm runs as
one `_MklLayerNorm` and the exact GELU inside its matmul (the speed onednn_forms.py measured
comes from these fusions; the TF profiler's op events say which kernels ran)."""

import collections

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_impl as kb
from bench.perf.inference_throughput import tf_op_ms
from keras_bert_impl.inference import TextPredictor, with_precision
from keras_bert_impl.inference.litert_forms import computes_in_forms
from keras_bert_impl.inference.onednn_forms import OneDnnForms, onednn_enabled
from keras_bert_impl.models.integer_forms import classifier_forward
from tests.harness import CLASSIFIER_IDS, CLASSIFIER_SEGMENTS, quantize, tiny_classifiers

IDS, SEGMENTS = CLASSIFIER_IDS, CLASSIFIER_SEGMENTS
SPEC = tf.TensorSpec([None, None], tf.int32)


def _traced(model, fused_norm):
    """classifier_forward in OneDnnForms as a tf.function (grappler rewrites only graphs)."""
    forms = OneDnnForms()
    forms.fused_norm = fused_norm

    @tf.function(input_signature=[SPEC] * 3)
    def forward(token_ids, segment_ids, padding_mask):
        inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        return classifier_forward(model, inputs, forms)

    return forward


@pytest.mark.parametrize("fused_norm", [True, False])
def test_forms_give_the_keras_model_outputs(fused_norm):
    if fused_norm and not onednn_enabled():
        pytest.skip("the fused LayerNorm form is taken only where TensorFlow runs oneDNN")
    for model, key in tiny_classifiers():
        want = np.asarray(model({"token_ids": IDS, "segment_ids": SEGMENTS, "padding_mask": IDS > 0})[key])
        outputs = _traced(model, fused_norm)(IDS, SEGMENTS, (IDS > 0).astype("int32"))
        assert list(outputs) == [key]
        difference = np.abs(np.asarray(outputs[key]) - want).max()
        assert difference < 1e-5, (model.pooling, key, difference)


def _op_types(run):
    """Counter of the op types TensorFlow's profiler saw while `run()` ran: nodes of each type."""
    return collections.Counter(kind for _, kind in tf_op_ms(run, 1))


@pytest.mark.skipif(not onednn_enabled(), reason="the fusions are oneDNN's (TensorFlow runs Eigen here)")
def test_text_predictor_runs_one_layer_norm_kernel_per_norm(minilm):
    model = kb.BertClassifier(minilm, num_classes=2)
    predictor = TextPredictor(model, sequence_length=32, batch_size=4)
    _, *ids = next(predictor.batches(["a fine film", "dull and long , with no end in sight", "ok", "yes"]))
    predictor._forward(*ids)  # traced and optimized before the profile
    kinds = _op_types(lambda: predictor._forward(*ids))
    norms = 2 * len(minilm.transformer_layers) + 1
    assert kinds["_MklLayerNorm"] == norms, kinds
    # Nothing of an unfused LayerNorm or GELU is left.
    assert not {"Mean", "SquaredDifference", "Rsqrt", "FusedBatchNormV3", "Erf", "Erfc"} & set(kinds), kinds


def test_a_model_under_a_mixed_policy_keeps_its_own_compute(minilm):
    """Only a float32 classifier runs in the forms: a bf16 copy given as "fp32" computes in bf16,
    as its layers say (the forms would silently run it in float32)."""
    model = kb.BertClassifier(minilm, num_classes=2)
    texts = ["a fine film", "dull and long , with no end in sight"]
    bf16 = TextPredictor(with_precision(model, "bf16"), sequence_length=32)
    kinds = _op_types(lambda: bf16.predict(texts))
    assert "_MklLayerNorm" not in kinds and "FusedBatchNormV3" not in kinds, kinds
    want = TextPredictor(model, sequence_length=32, precision="bf16").predict(texts)["logits"]
    np.testing.assert_array_equal(bf16.predict(texts)["logits"], want)


def test_only_float32_classifiers_compute_in_forms():
    """What the forms would get wrong runs its Keras graph: Keras' int8 kernels (only its own
    layers apply their scales) and a mixed policy's bf16."""
    keras.utils.set_random_seed(0)
    model = kb.BertClassifier(kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=20), num_classes=3)
    model({"token_ids": IDS, "segment_ids": SEGMENTS, "padding_mask": IDS > 0})
    assert computes_in_forms(model)
    assert not computes_in_forms(with_precision(model, "bf16"))
    quantize(model, "int8")
    assert not computes_in_forms(model)
