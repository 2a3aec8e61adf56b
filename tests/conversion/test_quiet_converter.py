"""A quiet converter (issue 31, item 5): the TFLite converter's own lines (absl's "Ignored
output_format", the quantizer's "fully_quantize: 0", MLIR's notes, the calibration's
tf.lite.Interpreter deprecation warning) stay off the terminal when a conversion works and
are all shown when it fails. Checked on the file descriptors of a child process, where C++
writes them, with TensorFlow's C++ logging at its most verbose."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD = """
import sys
import numpy as np
import tensorflow as tf
import keras_bert_impl as kb
from keras_bert_impl.conversion.input_contract import id_signature
from keras_bert_impl.conversion.integer_only import convert_integer_only
from keras_bert_impl.conversion.tflite_converter import convert_endpoint

backbone = kb.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                           max_sequence_length=8)
model = kb.BertClassifier(backbone, num_classes=2)
ids = np.array([[2, 7, 3, 0, 0, 0, 0, 0]], "int32")
example = {"ids": ids, "mask": (ids > 0).astype("int32"), "segment_ids": np.zeros_like(ids)}
print("converting", flush=True)
if sys.argv[1] == "works":
    convert_integer_only(model, 8, [example])  # calibrated: the quantizer and tf.lite.Interpreter speak
    print("converted", flush=True)
else:
    def erf(ids, mask, segment_ids):  # TFLite has no builtin ERF
        return {"x": tf.math.erf(tf.cast(ids, tf.float32))}
    convert_endpoint(erf, id_signature(batch=1, length=8))
"""
CONVERTER_LINES = (
    "Ignored output_format",
    "fully_quantize",
    "tf.lite.Interpreter is deprecated",
    "Reading SavedModel from",
    "tf_tfl_flatbuffer_helpers",
)


def run_child(case):
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "0",
        "PYTHONPATH": os.pathsep.join([REPO, os.path.join(REPO, "export")]),
    }
    return subprocess.run(
        [sys.executable, "-c", CHILD, case], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )


def after(text, marker):
    """What the child wrote after `marker` (TensorFlow's own import lines come before it)."""
    return text[text.index(marker) :] if marker in text else text


@pytest.mark.slow  # about 20 s or more: a child process imports TensorFlow and converts
def test_a_working_conversion_prints_nothing_of_the_converter():
    child = run_child("works")
    assert child.returncode == 0, child.stderr[-3000:]
    assert after(child.stdout, "converting") == "converting\nconverted\n"
    # stderr holds only TensorFlow's import-time lines, written before the conversion began.
    shown = [line for line in CONVERTER_LINES if line in child.stderr]
    assert not shown, child.stderr[-3000:]


@pytest.mark.slow  # about 20 s or more: a child process imports TensorFlow and converts
def test_a_failed_conversion_shows_what_the_converter_said():
    child = run_child("fails")
    assert child.returncode == 1
    for line in ("Ignored output_format", "Reading SavedModel from", "TF Select ops: Erf"):
        assert line in child.stderr, child.stderr[-3000:]
    # ...before the one-line error naming the op.
    assert child.stderr.index("Ignored output_format") < child.stderr.index(
        "ConversionError: TFLite has no builtin op for TensorFlow's Erf"
    )
