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
        seen["weights"] = [t["dtype"] for t in interpreter.get_tensor_details() if tuple(t["shape"]) == (64, 64)]

    gop_per_s = litert_matmul_peak(quantization, n=64, repeats=3, threads=1, inspect=keep)
    assert seen["ops"] == ["FULLY_CONNECTED"]
    assert weight_type in seen["weights"], seen["weights"]  # int8 weights: the dynamic-range file's
    assert gop_per_s > 0


def test_the_litert_ceiling_refuses_a_quantization_our_forwards_do_not_run():
    with pytest.raises(ValueError, match=r"quantization must be one of \('dynamic_int8', 'float32'\). Received: "
                                         r"quantization='float16'"):
        litert_matmul_peak("float16", n=64)
