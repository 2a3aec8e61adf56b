"""The opt-in Pallas kernels (`fused_kernels=True`, keras_bert_impl/kernels/) against the keras.ops
path: on JAX in `.venv-jax` through Pallas' interpret mode (KBERT_PALLAS_INTERPRET=1, so the
kernels run on the CPU as they would through Triton on a GPU, only interpreted), by
tests/backends/fused_kernels_child.py; and on TensorFlow here, where the option must change
nothing and import no kernel.
"""

import json
import os
import sys

import numpy as np
import pytest

from tests.conftest import REPO
from tests.side_venv import run_in_side_venv

CHILD = os.path.join(REPO, "tests", "backends", "fused_kernels_child.py")
FLOAT32_ATOL = 1e-5  # the float32 parity of tests/backends/test_backends.py
FLOAT32_RELATIVE = 1e-5
BF16_EPS = 2.0**-7  # bfloat16's machine epsilon: 8 significand bits
BF16_ULPS = 4


def run_child(command, xla_flags=""):
    environment = {"KERAS_BACKEND": "jax", "KBERT_PALLAS_INTERPRET": "1", "XLA_FLAGS": xla_flags}
    out = run_in_side_venv(".venv-jax", CHILD, command, env=environment, timeout=1800)
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def checks():
    return run_child("checks")


@pytest.mark.slow
def test_the_library_imports_no_kernel_until_a_fused_model_runs_where_kernels_do(checks):
    isolation = checks["isolation"]
    assert isolation["after_import"] == []
    assert isolation["after_default_model"] == []
    # Asked for, but neither a GPU nor the interpret switch: only the plain-Python choice module loads,
    # and the model computes what the keras.ops model computes, to the bit.
    assert isolation["after_fused_model_without_gpu"] == [
        "keras_bert_impl.kernels",
        "keras_bert_impl.kernels.fused_choice",
    ]
    assert isolation["fused_option_without_gpu_bitwise_equal"]


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["layer_norm", "layer_norm_dropout", "gelu"])
def test_each_kernel_equals_the_keras_ops_path_in_float32(checks, kernel):
    result = checks["kernels"][f"{kernel}_float32"]
    assert result["forward"] <= FLOAT32_ATOL, result
    for name, relative in result["gradients"].items():
        assert relative <= FLOAT32_RELATIVE, (name, result)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["layer_norm", "layer_norm_dropout", "gelu"])
def test_each_kernel_equals_the_keras_ops_path_on_bfloat16_inputs(checks, kernel):
    """Both sides round to bfloat16 (the keras.ops side also between its ops), so they may differ
    by a few of its ulps at the largest values."""
    result = checks["kernels"][f"{kernel}_bfloat16"]
    assert result["forward"] <= BF16_ULPS * BF16_EPS * result["reference_max_abs"], result
    for name, relative in result["gradients"].items():
        assert relative <= BF16_ULPS * BF16_EPS, (name, result)
    if "output_dtype" in result:
        assert result["output_dtype"] == "bfloat16"


@pytest.mark.slow
def test_the_kernels_erf_is_xlas_to_float32_rounding(checks):
    assert checks["kernels"]["erf_max_difference"] <= 4 * 2.0**-23  # a few float32 ulps of values up to 1


@pytest.mark.slow
def test_the_in_kernel_dropout_keeps_as_often_as_keras_and_the_backward_uses_the_forwards_mask(checks):
    stats = checks["dropout"]
    n, keep = stats["positions"], 1.0 - stats["rate"]
    bound = 5 * np.sqrt(keep * (1 - keep) / n)  # five binomial standard deviations
    for key in ("keep_rate_seed_0", "keep_rate_seed_1", "keep_rate_keras_dropout"):
        assert abs(stats[key] - keep) <= bound, (key, stats)
    assert stats["forward_equals_backward"]
    # Two seeds' masks agree where both keep or both drop: keep^2 + (1 - keep)^2 of the positions if
    # independent (1.0 if the seed were ignored).
    agree = keep**2 + (1 - keep) ** 2
    assert abs(stats["seeds_agree_fraction"] - agree) <= 5 * np.sqrt(agree * (1 - agree) / n), stats
    assert stats["rows_equal_to_row_0"] == 0  # the position counts, not only the column


@pytest.mark.slow
def test_a_tiny_pretrainer_trains_with_fit_through_the_kernels_as_through_keras_ops():
    # Three fits, each mostly XLA compiling its step on the CPU: without LLVM's optimizations that
    # takes about 40% less CPU time. Not for `checks`: unoptimized, the kernel's erf rounds
    # differently (5e-7 from XLA's, over the 4 ulps it keeps as compiled by default).
    report = run_child("train", xla_flags="--xla_backend_optimization_level=0")
    print(json.dumps({k: v for k, v in report.items() if k.startswith("fit_s") or k == "seconds"}))
    assert report["kernel_calls_while_tracing"]["residual_dropout_layer_norm"] > 0
    assert report["kernel_calls_while_tracing"]["bias_gelu"] > 0
    at_zero = report["dropout_0.0"]
    assert len(at_zero["fused"]) == len(at_zero["keras_ops"]) == 8
    np.testing.assert_allclose(at_zero["fused"], at_zero["keras_ops"], rtol=FLOAT32_RELATIVE, atol=0)
    # Different computations ran (the weights after 8 AdamW steps are not bit-equal), and end equal.
    assert 0 < report["dropout_0.0_trained_weights_max_difference"] <= FLOAT32_ATOL
    dropped = report["dropout_0.1"]["fused"]
    assert np.all(np.isfinite(dropped)) and dropped != at_zero["fused"]
    assert dropped[-1] < dropped[0]


def test_the_option_round_trips_and_changes_nothing_on_tensorflow(monkeypatch):
    """On TensorFlow the option is kept in the config and ignored: the same numbers, and neither
    JAX nor the kernels imported for it."""
    import keras

    import keras_bert_impl as kb

    # Another test of this worker (the docstring examples walk every module) may have imported
    # the kernels already: what counts is that this model's building and calls do not.
    for name in [n for n in sys.modules if n.startswith("keras_bert_impl.kernels.")]:
        monkeypatch.delitem(sys.modules, name)

    config = dict(
        vocabulary_size=40,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=8,
    )
    keras.utils.set_random_seed(0)
    plain = kb.BertBackbone(**config)
    keras.utils.set_random_seed(0)
    fused = kb.BertBackbone(**config, fused_kernels=True)
    assert fused.get_config()["fused_kernels"] is True and plain.get_config()["fused_kernels"] is False
    restored = kb.BertBackbone.from_config(fused.get_config())
    assert restored.fused_kernels and restored.transformer_layers[0].fused_kernels
    assert restored.transformer_layers[0].feed_forward.get_config()["fused_kernels"] is True
    x = {
        "token_ids": np.array([[2, 5, 7, 3, 0]], "int32"),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
    }
    np.testing.assert_array_equal(plain(x)["sequence_output"].numpy(), fused(x)["sequence_output"].numpy())
    assert "keras_bert_impl.kernels.residual_layer_norm" not in sys.modules
    assert "keras_bert_impl.kernels.bias_gelu" not in sys.modules


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_non_bool_fused_kernels_is_refused_naming_it(value):
    import keras_bert_impl as kb

    with pytest.raises(ValueError, match=r"fused_kernels must be True or False\. Received: fused_kernels="):
        kb.BertBackbone(
            vocabulary_size=40,
            num_layers=1,
            num_heads=2,
            hidden_dim=8,
            intermediate_dim=16,
            fused_kernels=value,
        )
