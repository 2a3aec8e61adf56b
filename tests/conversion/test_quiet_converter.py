"""A quiet converter (issue 31, item 5): the TFLite converter's own lines (absl's "Ignored
output_format", the quantizer's "fully_quantize: 0", MLIR's notes, the calibration's
tf.lite.Interpreter deprecation warning) stay off the terminal when a conversion works and
are all shown when it fails. Checked on the file descriptors of a child process, where C++
writes them, with TensorFlow's C++ logging at its most verbose."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# One child runs both cases, the working conversion first, each after a marker on both streams:
# a second child's start and TensorFlow import cost more than its conversion.
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
for case in sys.argv[1:]:
    for stream in (sys.stdout, sys.stderr):
        print(f"<case {case}>", file=stream, flush=True)
    print("converting", flush=True)
    if case == "works":
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


@pytest.fixture(scope="module")
def children():
    """{case: (returncode, stdout, stderr)} of "works" and "fails", from one child process: a
    case's streams are what the child wrote between its marker and the next (the first case's
    from the start: TensorFlow's import lines); returncode None for a case that never began."""
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "0",
        "PYTHONPATH": os.pathsep.join([REPO, os.path.join(REPO, "export")]),
    }
    cases = ("works", "fails")
    child = subprocess.run(
        [sys.executable, "-c", CHILD, *cases], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )
    # Each stream cut at the markers: [before the first case, the first case's, the second's].
    parts = [re.split(r"<case \w+>\n", text) for text in (child.stdout, child.stderr)]
    results = {}
    for i, case in enumerate(cases):
        began, followed = (len(parts[0]) > i + 1 + j for j in (0, 1))
        # A case another one follows ended without an exception; the last one ended the child.
        code = 0 if followed else child.returncode if began else None
        results[case] = (code, *["".join(p[: i + 2]) if i == 0 else "".join(p[i + 1 : i + 2]) for p in parts])
    return results


def after(text, marker):
    """What the child wrote after `marker` (TensorFlow's own import lines come before it)."""
    return text[text.index(marker) :] if marker in text else text


@pytest.mark.slow  # about 20 s or more: a child process imports TensorFlow and converts
def test_a_working_conversion_prints_nothing_of_the_converter(children):
    returncode, stdout, stderr = children["works"]
    assert returncode == 0, stderr[-3000:]
    assert after(stdout, "converting") == "converting\nconverted\n"
    # stderr holds only TensorFlow's import-time lines, written before the conversion began.
    shown = [line for line in CONVERTER_LINES if line in stderr]
    assert not shown, stderr[-3000:]


@pytest.mark.slow  # about 20 s or more: a child process imports TensorFlow and converts
def test_a_failed_conversion_shows_what_the_converter_said(children):
    returncode, _, stderr = children["fails"]
    assert returncode == 1
    for line in ("Ignored output_format", "Reading SavedModel from", "TF Select ops: Erf"):
        assert line in stderr, stderr[-3000:]
    # ...before the one-line error naming the op.
    assert stderr.index("Ignored output_format") < stderr.index(
        "ConversionError: TFLite has no builtin op for TensorFlow's Erf"
    )
