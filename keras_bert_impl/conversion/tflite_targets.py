"""Where a .tflite file can run, from static checks of the file (issue 31, "runs on").

No GPU, NPU or Edge TPU delegate runs on the machines this project is tested on, so the export
report says what each file's ops, tensors and shapes allow instead of timing it there:

- "CPU": LiteRT's default CPU delegate (XNNPACK) runs every file `kbert export` writes (the
  text-in file with its tensorflow-text kernels registered).
- "GPU (shapes)": the inputs have a static `shape_signature` (no -1) and no SHAPE or PACK op
  computes a shape at run time, which the GPU delegate needs when it is built. Its ops are not
  checked: TensorFlow Lite's GPU compatibility analyzer
  (`tf.lite.experimental.Analyzer.analyze(..., gpu_compatibility=True)`, TF 2.20 and
  ai-edge-litert's copy alike) calls even UNIQUE and SEGMENT_SUM, which the GPU delegate
  refuses, compatible (tests/conversion/test_tflite_targets.py holds that), and LiteRT's
  WebGPU accelerator finds no adapter on a machine without a GPU.
- "integer NPU": every tensor between the id inputs and the output is an integer (int8, or
  int16 activations with int8 weights: TFLite's 16x8), float at most the last DEQUANTIZE's
  output, static shapes: what vendors' NPU delegates take.
- "Edge TPU": the same, 8-bit only (no int16 tensor): what the Edge TPU compiler takes as
  input (the compiler itself is not run here).
"""

import numpy as np

TARGETS = ("CPU", "GPU (shapes)", "integer NPU", "Edge TPU")
INTEGER_DTYPES = ("int8", "int16", "int32", "bool")
SHAPE_OPS = ("SHAPE", "PACK")


class TfliteTargets:
    """The static facts of one .tflite and the TARGETS they allow.

    Args:
        flatbuffer: the .tflite file's bytes.

    Attributes:
        dynamic_inputs: names of the inputs whose shape_signature has a -1.
        shape_ops: the SHAPE/PACK ops the file runs (sorted names).
        float_tensors: (op, "input i" / "output i", dtype) of every non-integer tensor an op
            reads or writes, but a DEQUANTIZE's float output (it counts as the input of any op
            that reads it: only the one that gives the final output goes free) and the int64
            biases of 16x8 fully connected layers (weights, TFLite's 16x8 scheme).
        int16: whether any tensor is int16 (16x8 activations).
    """

    def __init__(self, flatbuffer):
        if not isinstance(flatbuffer, (bytes, bytearray)):
            raise TypeError(
                f"flatbuffer must be the .tflite file's bytes. Received: {type(flatbuffer).__name__}"
            )
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter(model_content=bytes(flatbuffer))
        self.dynamic_inputs = sorted(
            d["name"] for d in interpreter.get_input_details() if (np.asarray(d["shape_signature"]) < 0).any()
        )
        dtypes = {t["index"]: np.dtype(t["dtype"]).name for t in interpreter.get_tensor_details()}
        ops = interpreter._get_ops_details()  # the interpreter's only listing of its ops (no public twin)
        self.shape_ops = sorted({op["op_name"] for op in ops if op["op_name"] in SHAPE_OPS})
        self.int16 = "int16" in dtypes.values()
        self.float_tensors = []
        for op in ops:
            name = op["op_name"]
            roles = [(f"input {i}", t) for i, t in enumerate(op["inputs"]) if t >= 0]
            roles += [(f"output {i}", t) for i, t in enumerate(op["outputs"])]
            for role, tensor in roles:
                dtype = dtypes[tensor]
                if dtype in INTEGER_DTYPES or (name == "DEQUANTIZE" and role == "output 0"):
                    continue
                if dtype == "int64" and name == "FULLY_CONNECTED" and role == "input 2" and self.int16:
                    continue
                self.float_tensors.append((name, role, dtype))

    @property
    def static_shapes(self):
        return not self.dynamic_inputs and not self.shape_ops

    @property
    def integer_only(self):
        return self.static_shapes and not self.float_tensors

    def runs_on(self):
        """The TARGETS this file can run on, in their order."""
        allowed = {
            "CPU": True,
            "GPU (shapes)": self.static_shapes,
            "integer NPU": self.integer_only,
            "Edge TPU": self.integer_only and not self.int16,
        }
        return [target for target in TARGETS if allowed[target]]

    def why_not(self):
        """{target: the first reason it is ruled out} for the TARGETS this file cannot run on."""
        shapes = (
            f"dynamic input shapes ({', '.join(self.dynamic_inputs)})"
            if self.dynamic_inputs
            else f"shapes computed at run time ({', '.join(self.shape_ops)})"
            if self.shape_ops
            else None
        )
        floats = (
            f"{len(self.float_tensors)} float tensors (the first: {self.float_tensors[0][0]}'s "
            f"{self.float_tensors[0][1]}, {self.float_tensors[0][2]})"
            if self.float_tensors
            else None
        )
        reasons = {
            "GPU (shapes)": shapes,
            "integer NPU": shapes or floats,
            "Edge TPU": shapes or floats or ("int16 activations (16x8)" if self.int16 else None),
        }
        return {target: reason for target, reason in reasons.items() if reason}
