"""`saved_model_converter`: one loaded converter gives each precision of a SavedModel the bytes a
fresh `convert_saved_model` gives, in any order, and int8_mixed's bytes are what
TensorFlow's QuantizationDebugger returns for the same denylists (the converter takes the
debugger's two steps without its debug model)."""

import pytest
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl.conversion import tflite_converter
from keras_bert_impl.conversion.input_contract import id_signature, named_endpoint
from keras_bert_impl.conversion.tflite_converter import (
    convert_saved_model,
    endpoint_saved_model,
    saved_model_converter,
)
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS
from tests.harness import id_calibration

LENGTH = 8


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """The ids SavedModel of a small classifier at free [B, T], as `kbert export` converts it."""
    backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100, max_sequence_length=LENGTH)
    model = kb.BertClassifier(backbone, num_classes=2)

    def forward(ids, mask, segment_ids):
        outputs = model({"token_ids": ids, "segment_ids": segment_ids, "padding_mask": mask})
        return {name: tf.cast(value, tf.float32) for name, value in outputs.items()}

    with endpoint_saved_model(named_endpoint(forward, EXPORT_ID_INPUTS), id_signature()) as folder:
        kept = str(tmp_path_factory.mktemp("ids") / "saved_model")
        tf.io.gfile.rename(folder, kept)
    return kept


@pytest.fixture(scope="module")
def calibration():
    return id_calibration(LENGTH)


def test_one_loaded_converter_gives_each_precision_as_a_fresh_one(saved_model, calibration, monkeypatch):
    denylists = []
    original = tflite_converter._denylisted_quantization

    def recorded(converter, denylisted_ops, denylisted_nodes):
        denylists.append((denylisted_ops, denylisted_nodes))
        return original(converter, denylisted_ops, denylisted_nodes)

    monkeypatch.setattr(tflite_converter, "_denylisted_quantization", recorded)
    convert = saved_model_converter(saved_model)
    # int8_mixed first (its own float conversion for the op list), then again after float32
    # (whose bytes it reads instead): the calibration-only switch it sets reaches neither.
    order = ("int8_mixed", "float32", "float16", "int8_mixed")
    got = [convert(q, calibration if q == "int8_mixed" else None) for q in order]
    assert denylists[0] == denylists[1] and got[0] == got[3]
    ops, nodes = denylists[0]
    assert "SOFTMAX" in ops and nodes  # float nodes of the quantized kinds, by name
    assert got[2] == convert_saved_model(saved_model, "float16")

    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = tflite_converter._representative(calibration)
    debugger = tf.lite.experimental.QuantizationDebugger(
        converter=converter,
        debug_dataset=converter.representative_dataset,
        debug_options=tf.lite.experimental.QuantizationDebugOptions(
            denylisted_ops=ops, denylisted_nodes=nodes
        ),
    )
    assert got[0] == debugger.get_nondebug_quantized_model()
