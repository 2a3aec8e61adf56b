"""TfliteTargets: where a .tflite can run, from its ops, tensor types and shapes and TensorFlow
Lite's own GPU compatibility analyzer, on files of a small classifier converted the ways
`kbert export` converts them."""

import contextlib
import io

import pytest
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl.conversion.input_contract import id_signature, named_endpoint
from keras_bert_impl.tensor_names import MODEL_ID_INPUTS
from keras_bert_impl.conversion.integer_only import convert_integer_only, integer_forward
from keras_bert_impl.conversion.tflite_converter import convert_endpoint
from keras_bert_impl.conversion.tflite_targets import TfliteTargets
from tests.harness import id_calibration

LENGTH = 8


@pytest.fixture(scope="module")
def model():
    backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100, max_sequence_length=LENGTH)
    return kb.BertClassifier(backbone, num_classes=2)


@pytest.fixture(scope="module")
def calibration():
    return id_calibration(LENGTH)


def _free_shape_file(model, quantization):
    """The model at free [B, T], as tflite/ and `--precision int8` convert it."""

    def forward(token_ids, segment_ids, padding_mask):
        outputs = model({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask})
        return {name: tf.cast(value, tf.float32) for name, value in outputs.items()}

    return convert_endpoint(
        named_endpoint(forward, MODEL_ID_INPUTS), id_signature(MODEL_ID_INPUTS), quantization
    )


def test_free_shape_files_run_on_the_cpu_only(model):
    for quantization in ("float32", "dynamic_int8"):
        targets = TfliteTargets(_free_shape_file(model, quantization))
        assert targets.runs_on() == ["CPU"], quantization
        assert sorted(targets.dynamic_inputs) == [f"serving_default_{n}:0" for n in sorted(MODEL_ID_INPUTS)]
        assert targets.why_not()["GPU (shapes)"].startswith("dynamic input shapes")
        assert targets.float_tensors  # float activations
        assert targets.why_not()["integer NPU"].startswith("dynamic input shapes")


def test_static_float_file_has_the_gpus_shapes_and_is_no_integer_accelerators(model):
    function = integer_forward(model, LENGTH)  # [1, S], the integer-only file's graph
    targets = TfliteTargets(convert_endpoint(function.python_function, function.input_signature, "float32"))
    assert targets.static_shapes
    assert targets.runs_on() == ["CPU", "GPU (shapes)"]
    assert "float tensors" in targets.why_not()["integer NPU"]
    assert targets.why_not()["Edge TPU"].startswith(f"{len(targets.float_tensors)} float tensors")


def test_the_gpu_analyzer_of_this_tensorflow_checks_no_op():
    """Why "GPU (shapes)" checks shapes only: TF 2.20's GPU compatibility analyzer calls a file
    of UNIQUE and SEGMENT_SUM compatible, ops the GPU delegate refuses
    (tensorflow/lite/tools/versioning/gpu_compatibility.cc: "Not supported op"). When this
    fails, the analyzer works: use it in TfliteTargets."""

    def forward(x):
        unique = tf.unique(tf.reshape(tf.cast(x, tf.int32), [-1])).y
        return {
            "sums": tf.math.segment_sum(x[0], tf.constant([0, 0, 1, 1, 2, 2, 3, 3])),
            "count": tf.cast(tf.size(unique), tf.float32),
        }

    flatbuffer = convert_endpoint(forward, [tf.TensorSpec([1, 8], tf.float32, name="x")])
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        tf.lite.experimental.Analyzer.analyze(model_content=flatbuffer, gpu_compatibility=True)
    assert " UNIQUE(" in report.getvalue() and " SEGMENT_SUM(" in report.getvalue()
    assert "GPU COMPATIBILITY WARNING" not in report.getvalue()
    assert "Your model looks compatible with GPU delegate" in report.getvalue()


@pytest.mark.parametrize(
    "quantization, runs_on",
    [
        ("int8_only", ["CPU", "GPU (shapes)", "integer NPU", "Edge TPU"]),
        ("int16x8_only", ["CPU", "GPU (shapes)", "integer NPU"]),
    ],
)
def test_integer_only_files_run_on_integer_accelerators(model, calibration, quantization, runs_on):
    targets = TfliteTargets(convert_integer_only(model, LENGTH, calibration, quantization))
    assert not targets.float_tensors and targets.static_shapes
    assert targets.runs_on() == runs_on
    assert targets.int16 == (quantization == "int16x8_only")
    if quantization == "int16x8_only":
        assert targets.why_not()["Edge TPU"] == "int16 activations (16x8)"


def test_bad_input_names_it():
    with pytest.raises(TypeError, match="flatbuffer must be the .tflite file's bytes. Received: str"):
        TfliteTargets("model.tflite")
