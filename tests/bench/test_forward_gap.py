"""bench/perf/forward_gap.py's LiteRT ceilings (issue 33's "int8 against its own int8 matmul
ceiling"): the product it times is the one kernel our LiteRT forwards run, in their quantization,
checked on the converted file itself."""

import numpy as np
import pytest

from bench.perf.forward_gap import litert_matmul_peak


@pytest.mark.parametrize("quantization, weight_type", [("float32", np.float32), ("dynamic_int8", np.int8)])
def test_the_litert_ceiling_times_one_fully_connected_in_the_forwards_quantization(quantization, weight_type):
    from ai_edge_litert.interpreter import Interpreter

    seen = {}

    def keep(flatbuffer):
        interpreter = Interpreter(model_content=flatbuffer)
        seen["ops"] = [op["op_name"] for op in interpreter._get_ops_details()]
        seen["weights"] = [
            t["dtype"] for t in interpreter.get_tensor_details() if tuple(t["shape"]) == (64, 64)
        ]

    gop_per_s = litert_matmul_peak(quantization, n=64, repeats=3, threads=1, inspect=keep)
    assert seen["ops"] == ["FULLY_CONNECTED"]
    assert weight_type in seen["weights"], seen["weights"]  # int8 weights: the dynamic-range file's
    assert gop_per_s > 0


def test_the_litert_ceiling_refuses_a_quantization_our_forwards_do_not_run():
    with pytest.raises(
        ValueError,
        match=r"quantization must be one of \('dynamic_int8', 'float32'\). Received: "
        r"quantization='float16'",
    ):
        litert_matmul_peak("float16", n=64)


def test_the_fused_qkv_lever_computes_the_same_classifier(monkeypatch):
    """ours_fp32_fused_qkv changes only how Q, K and V are multiplied: its logits are the
    separate projections' (and so the Keras model's) on a padded batch."""
    import keras

    import keras_bert_impl as kb
    from bench.perf.forward_gap import _fused_projections
    from keras_bert_impl.inference.onednn_forms import OneDnnForms
    from keras_bert_impl.models import integer_forms

    keras.utils.set_random_seed(0)
    model = kb.BertClassifier(kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100), num_classes=3)
    ids = np.array([[2, 7, 9, 4, 3, 0], [2, 5, 3, 0, 0, 0]], "int32")
    inputs = {"token_ids": ids, "padding_mask": ids > 0, "segment_ids": np.zeros_like(ids)}
    separate = integer_forms.classifier_forward(model, inputs, OneDnnForms())["logits"]
    monkeypatch.setattr(integer_forms, "_projections", _fused_projections)
    fused = integer_forms.classifier_forward(model, inputs, OneDnnForms())["logits"]
    np.testing.assert_allclose(fused, separate, atol=1e-5)
    np.testing.assert_allclose(fused, model(inputs)["logits"], atol=1e-5)
    assert not np.allclose(fused, 0.0)
