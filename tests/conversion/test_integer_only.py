"""The static [1, S] .tflite files (issue 31, items 1 and 6): `integer_forward` computes the
classifier's function in float (within 1e-5 of Keras on real MR sentences); its 8x8 and 16x8
conversions hold only integer tensors between the int32 id inputs and the one DEQUANTIZE that
gives the logits and give the float model's top label on held-out MR sentences; its float16
conversion is the GPU delegate's file; `kbert export --static-lengths` writes each once per
length. On a bert_tiny-shaped classifier trained for three epochs on 2,000 MR sentences."""

import collections
import csv
import json
import os

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from keras_bert_impl.conversion.integer_only import convert_integer_only, convert_static, integer_forward
from keras_bert_impl.conversion.tflite_targets import TfliteTargets
from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.tokenization.vocabulary import read_vocabulary
from tests.run_once import once_per_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MR = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee2.csv")
VOCAB = os.path.join(REPO, "data", "minilm", "vocab.txt")
LENGTH = 32
# The tensor types allowed between the inputs and the last DEQUANTIZE.
INTEGER_TYPES = {"int8", "int16", "int32", "bool"}


@pytest.fixture(scope="module")
def mr():
    """(train, calibration, held-out) rows of MR, disjoint, both classes in each; tokenized,
    and the rows themselves."""
    with open(MR, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    preprocessor = BertPreprocessor(VOCAB, sequence_length=LENGTH)

    def tokenized(part):
        x = {k: np.asarray(v, np.int32) for k, v in preprocessor([text for _, text in part]).items()}
        return x, np.array([0 if label == "-1" else 1 for label, _ in part]), part

    return (
        tokenized(rows[400:1400] + rows[-1400:-400]),
        tokenized(rows[150:250] + rows[-250:-150]),
        tokenized(rows[:150] + rows[-150:]),
    )


def examples(x):
    """The rows of `x` as the export's [1, S] inputs."""
    return [
        {
            "ids": x["token_ids"][i : i + 1],
            "mask": x["padding_mask"][i : i + 1],
            "segment_ids": x["segment_ids"][i : i + 1],
        }
        for i in range(len(x["token_ids"]))
    ]


def classifier(**kwargs):
    backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=30522, max_sequence_length=LENGTH)
    backbone.set_vocabulary(read_vocabulary(VOCAB), lowercase=True)
    return kb.BertClassifier(backbone, num_classes=2, label_names=["-1", "1"], **kwargs)


@pytest.fixture(scope="module")
def trained(mr, tmp_path_factory):
    """The token-mean classifier after three epochs on 2,000 MR sentences (held-out accuracy
    about 0.63, 97% of the held-out logits' margins above 0.1: a classifier, not near-ties),
    and its float logits on the held-out sentences. Trained once per test run (tests/run_once.py)
    and loaded by each module that reads it (this one and test_quantization_aware)."""
    (x, y, _), _, (held_out, *_) = mr

    def build(folder):
        keras.utils.set_random_seed(0)
        model = classifier(pooling="mean")
        model.compile(optimizer=keras.optimizers.Adam(3e-4))
        model.fit(x, y, epochs=3, batch_size=32, verbose=0)
        model.save(str(folder / "trained.keras"))
        np.save(folder / "logits.npy", model.predict(held_out, verbose=0)["logits"])
        return {"model": str(folder / "trained.keras"), "logits": str(folder / "logits.npy")}

    files = once_per_run(tmp_path_factory, "integer_only_trained", build)
    return keras.saving.load_model(files["model"]), np.load(files["logits"])


def run(function, x):
    """`function`'s outputs on every row of `x`, one [1, S] row at a time, concatenated."""
    outputs = [function(**example) for example in examples(x)]
    return {name: np.concatenate([np.asarray(o[name]) for o in outputs]) for name in outputs[0]}


@pytest.mark.slow
def test_integer_forward_equals_keras_in_float(mr, trained):
    *_, (held_out, *_) = mr
    model, want = trained
    got = run(integer_forward(model, LENGTH), held_out)["logits"]
    assert np.abs(got - want).max() < 1e-5, np.abs(got - want).max()
    # BERT's pooled [CLS] and an activation on the head (untrained weights: the function is the point).
    keras.utils.set_random_seed(1)
    other = classifier(pooling="pooled", activation="softmax")
    want = other.predict(held_out, verbose=0)["probabilities"]
    got = run(integer_forward(other, LENGTH), held_out)["probabilities"]
    assert np.abs(got - want).max() < 1e-5, np.abs(got - want).max()


def tensor_types(flatbuffer):
    """(op name, [(role, tensor dtype name)]) of every op of the .tflite, its input and output
    details, through LiteRT's interpreter."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=flatbuffer)
    dtypes = {t["index"]: np.dtype(t["dtype"]).name for t in interpreter.get_tensor_details()}
    ops = [
        (
            op["op_name"],
            [(f"input {i}", dtypes[t]) for i, t in enumerate(op["inputs"]) if t >= 0]
            + [(f"output {i}", dtypes[t]) for i, t in enumerate(op["outputs"])],
        )
        # _get_ops_details is the interpreter's only listing of its ops (no public twin).
        for op in interpreter._get_ops_details()
    ]
    return ops, interpreter.get_input_details(), interpreter.get_output_details()


@pytest.mark.slow
@pytest.mark.parametrize(
    "quantization, activation_type, least_agreement",
    [
        # Measured on 300 held-out sentences: 8x8 299/300 (max logit difference 0.12), 16x8
        # 300/300 (0.006).
        ("int8_only", "int8", 0.97),
        ("int16x8_only", "int16", 0.99),
    ],
)
def test_integer_only_file(mr, trained, quantization, activation_type, least_agreement):
    _, (calibration, *_), (held_out, *_) = mr
    model, want = trained
    flatbuffer = convert_integer_only(model, LENGTH, examples(calibration), quantization)

    ops, inputs, outputs = tensor_types(flatbuffer)
    float_ops = []
    for name, tensors in ops:
        for role, dtype in tensors:
            if dtype in INTEGER_TYPES or name == "DEQUANTIZE" and role == "output 0":
                continue
            # 16x8's fully connected layers add an int64 bias (TFLite's 16x8 scheme): a weight.
            if (
                dtype == "int64"
                and name == "FULLY_CONNECTED"
                and role == "input 2"
                and activation_type == "int16"
            ):
                continue
            float_ops.append((name, role, dtype))
    assert not float_ops, float_ops
    dequantize = [tensors for name, tensors in ops if name == "DEQUANTIZE"]
    assert dequantize == [[("input 0", activation_type), ("output 0", "float32")]]
    counts = collections.Counter(name for name, _ in ops)
    # Every kind of op a BERT classifier needs ran integer, not a trimmed graph.
    for op in ("GATHER", "FULLY_CONNECTED", "BATCH_MATMUL", "SOFTMAX", "GELU", "MEAN", "RSQRT"):
        assert counts[op] > 0, counts
    # Static shapes: [1, S] int32 in, [1, 2] float32 out.
    assert sorted((d["name"], d["shape_signature"].tolist(), np.dtype(d["dtype"]).name) for d in inputs) == [
        (f"serving_default_{name}:0", [1, LENGTH], "int32") for name in ("ids", "mask", "segment_ids")
    ]
    assert [(d["shape_signature"].tolist(), np.dtype(d["dtype"]).name) for d in outputs] == [
        ([1, 2], "float32")
    ]

    float_bytes = sum(w.size * 4 for w in model.get_weights())
    # 8x8: a quarter of float32 (0.25x measured). 16x8 keeps the embedding tables, read by
    # GATHER as activations, in int16: 0.48x on this model, whose vocabulary is most of it.
    assert len(flatbuffer) < (0.3 if activation_type == "int8" else 0.5) * float_bytes, (
        len(flatbuffer),
        float_bytes,
    )

    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_content=flatbuffer).get_signature_runner("serving_default")
    got = run(runner, held_out)["logits"]
    agreement = np.mean(got.argmax(-1) == want.argmax(-1))
    assert agreement >= least_agreement, agreement


@pytest.mark.slow
def test_gpu_file(mr, trained):
    """float16_gpu: static [1, S], no SHAPE or PACK op, TensorFlow Lite's GPU analyzer without a
    warning, float16 weights (about half of float32), and logits within 1e-2 of Keras through
    LiteRT on the CPU on 300 held-out sentences."""
    import contextlib
    import io

    import tensorflow as tf

    *_, (held_out, *_) = mr
    model, want = trained
    flatbuffer = convert_static(model, LENGTH, "float16_gpu")
    targets = TfliteTargets(flatbuffer)
    assert targets.static_shapes and not targets.shape_ops and not targets.dynamic_inputs
    assert targets.runs_on() == ["CPU", "GPU (shapes)"]
    analysis = io.StringIO()
    with contextlib.redirect_stdout(analysis):
        tf.lite.experimental.Analyzer.analyze(model_content=flatbuffer, gpu_compatibility=True)
    assert "GPU COMPATIBILITY WARNING" not in analysis.getvalue()
    assert "Your model looks compatible with GPU delegate" in analysis.getvalue()
    float_bytes = sum(w.size * 4 for w in model.get_weights())
    assert 0.45 * float_bytes < len(flatbuffer) < 0.55 * float_bytes, (len(flatbuffer), float_bytes)

    from ai_edge_litert.interpreter import Interpreter

    got = run(Interpreter(model_content=flatbuffer).get_signature_runner("serving_default"), held_out)[
        "logits"
    ]
    assert np.abs(got - want).max() < 1e-2, np.abs(got - want).max()
    assert (got.argmax(-1) == want.argmax(-1)).mean() >= 0.99


def test_bad_arguments_name_the_argument():
    model = classifier()
    with pytest.raises(ValueError, match="BertClassifier. Received: model=BertBackbone"):
        integer_forward(model.backbone, LENGTH)
    with pytest.raises(ValueError, match="sequence_length 33 is outside 3..32"):
        integer_forward(model, LENGTH + 1)
    with pytest.raises(ValueError, match="quantization.*int8_mixed"):
        convert_integer_only(model, LENGTH, [], "int8_mixed")
    with pytest.raises(ValueError, match="int8_only needs calibration_inputs"):
        convert_integer_only(model, LENGTH, [], "int8_only")
    with pytest.raises(ValueError, match="quantization.*float16'"):
        convert_static(model, LENGTH, "float16")
    # Calibration examples the file cannot take: named before the converter runs them (it said
    # "KeyError: 'ids'" or "[1,64,32] and [1,32,32] are not broadcastable").
    ids = np.full((1, LENGTH), 5, "int32")
    good = {"ids": ids, "mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    for example, message in [
        (
            {"token_ids": ids, "padding_mask": ids, "segment_ids": ids},
            r"calibration_inputs\[1\] must be a dict of \['ids', 'mask', 'segment_ids'\]",
        ),
        (
            {**good, "ids": np.full((1, 2 * LENGTH), 5, "int32")},
            rf"calibration_inputs\[1\]\['ids'\] must have the shape \[1, {LENGTH}\] of the file",
        ),
        (
            {**good, "mask": np.full((1, LENGTH), 2, "int32")},
            r"calibration_inputs\[1\]\['mask'\] must hold integers in \[0, 2\)",
        ),
    ]:
        with pytest.raises(ValueError, match=message):
            convert_integer_only(model, LENGTH, [good, example])


@pytest.mark.slow
def test_kbert_export_writes_the_integer_only_file(mr, trained, tmp_path, capfd):
    """`kbert export --quantizations int8_only,int16x8_only`: the files, and the report measures
    them one [1, S] row at a time beside the dynamic-shape file; neither the converter's lines
    nor LiteRT's XNNPACK line reach the terminal (issue 31, item 5)."""
    _, (*_, calibration_rows), (*_, held_out_rows) = mr
    model, _ = trained
    path = str(tmp_path / "model.keras")
    model.save(path)

    def write(name, rows):
        with open(tmp_path / name, "w", encoding="utf-8", newline="") as f:
            csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
        return str(tmp_path / name)

    out = str(tmp_path / "export")
    assert (
        main(
            [
                "export",
                "--model",
                path,
                "--output",
                out,
                "--formats",
                "tflite",
                "--seq-len",
                str(LENGTH),
                "--quantizations",
                "dynamic_int8,int8_only,int16x8_only",
                "--calibration",
                write("calibration.csv", calibration_rows),
                "--validation",
                write("validation.csv", held_out_rows),
                "--no-header",
                "--columns",
                "label,text",
                "--repeats",
                "1",
            ]
        )
        == 0
    )
    err = capfd.readouterr().err
    shown = [
        line
        for line in ("Ignored output_format", "fully_quantize", "Reading SavedModel", "XNNPACK")
        if line in err
    ]
    assert not shown and "kbert export: wrote" in err, err[-3000:]
    with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
        rows = {row["artifact"]: row for row in json.load(f)["artifacts"]}
    assert set(rows) == {"tflite_dynamic_int8", "tflite_int8_only", "tflite_int16x8_only"}
    for name in ("tflite_int8_only", "tflite_int16x8_only"):
        assert os.path.isfile(os.path.join(out, "tflite", f"bert_{name[len('tflite_') :]}.tflite"))
        assert rows[name]["top_label_agreement"] >= 0.97, rows[name]
        assert "batch1_p50_ms" in rows[name] and "batch32_p50_ms" not in rows[name], rows[name]
    assert "batch32_p50_ms" in rows["tflite_dynamic_int8"]
    # Where each runs (static checks, conversion/tflite_targets.py): 16x8's int16 is not the Edge TPU's.
    assert rows["tflite_dynamic_int8"]["runs_on"] == ["CPU"]
    assert rows["tflite_int8_only"]["runs_on"] == ["CPU", "GPU (shapes)", "integer NPU", "Edge TPU"]
    assert rows["tflite_int16x8_only"]["runs_on"] == ["CPU", "GPU (shapes)", "integer NPU"]


def test_kbert_export_refuses_the_integer_only_file_of_an_embedder(tmp_path, capsys):
    path = str(tmp_path / "backbone.keras")
    classifier().backbone.save(path)
    code = main(
        [
            "export",
            "--model",
            path,
            "--output",
            str(tmp_path / "out"),
            "--formats",
            "tflite",
            "--seq-len",
            "8",
            "--quantizations",
            "int8_only",
            "--calibration",
            MR,
            "--no-header",
            "--columns",
            "label,text",
        ]
    )
    assert code == 2
    assert "int8_only is written for classifiers; this model's head is 'embedder'" in capsys.readouterr().err


@pytest.mark.slow
def test_kbert_export_writes_a_static_file_per_length(mr, trained, tmp_path):
    """`--static-lengths 16,32`: the GPU and int8-only files once per length, each at its own
    static [1, S], each measured in the report on the texts tokenized at its length."""
    _, (*_, calibration_rows), (*_, held_out_rows) = mr
    model, _ = trained
    path = str(tmp_path / "model.keras")
    model.save(path)
    rows_files = {}
    for name, rows in (("calibration", calibration_rows), ("validation", held_out_rows)):
        rows_files[name] = str(tmp_path / f"{name}.csv")
        with open(rows_files[name], "w", encoding="utf-8", newline="") as f:
            csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    out = str(tmp_path / "export")
    assert (
        main(
            [
                "export",
                "--model",
                path,
                "--output",
                out,
                "--formats",
                "tflite",
                "--seq-len",
                str(LENGTH),
                "--quantizations",
                "float16_gpu,int8_only",
                "--static-lengths",
                "32,16",
                "--calibration",
                rows_files["calibration"],
                "--validation",
                rows_files["validation"],
                "--no-header",
                "--columns",
                "label,text",
                "--repeats",
                "1",
            ]
        )
        == 0
    )
    with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
        rows = {row["artifact"]: row for row in json.load(f)["artifacts"]}
    assert set(rows) == {f"tflite_{q}_{s}" for q in ("float16_gpu", "int8_only") for s in (16, 32)}

    from ai_edge_litert.interpreter import Interpreter

    for quantization in ("float16_gpu", "int8_only"):
        for length in (16, 32):
            row = rows[f"tflite_{quantization}_{length}"]
            file = os.path.join(out, "tflite", f"bert_{quantization}_{length}.tflite")
            shapes = [d["shape_signature"].tolist() for d in Interpreter(model_path=file).get_input_details()]
            assert shapes == [[1, length]] * 3 and row["sequence_length"] == length
            assert "GPU (shapes)" in row["runs_on"] and ("Edge TPU" in row["runs_on"]) == (
                quantization == "int8_only"
            )
    # At the model's own length, the files agree with it; at 16 the texts are cut shorter than
    # Keras saw them, so only most labels stay.
    assert rows["tflite_float16_gpu_32"]["top_label_agreement"] >= 0.99
    assert rows["tflite_int8_only_32"]["top_label_agreement"] >= 0.97
    assert rows["tflite_float16_gpu_16"]["top_label_agreement"] >= 0.7


@pytest.mark.parametrize(
    "lengths, quantizations, message",
    [
        ("16,33", "float16_gpu", "--static-lengths 33 is outside 3..32"),
        ("16", "float32", "no static file is asked for: add one of float16_gpu, int8_only, int16x8_only"),
        (
            "16,x",
            "float16_gpu",
            "--static-lengths takes comma-separated lengths in wordpieces, e.g. 64,128. Received: '16,x'",
        ),
    ],
)
def test_kbert_export_refuses_bad_static_lengths(tmp_path, capsys, lengths, quantizations, message):
    path = str(tmp_path / "classifier.keras")
    classifier().save(path)
    out = tmp_path / "out"
    code = main(
        [
            "export",
            "--model",
            path,
            "--output",
            str(out),
            "--formats",
            "tflite",
            "--seq-len",
            "16",
            "--quantizations",
            quantizations,
            "--static-lengths",
            lengths,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err
    assert not out.exists()


@pytest.mark.slow  # about 20 s or more: a calibrated conversion, then MediaPipe in its own venv
def test_mediapipe_runs_the_integer_only_classifier(mr, trained, tmp_path):
    """`kbert export --formats mediapipe --quantizations int8_only`: MediaPipe's TextClassifier
    loads the integer-only file with its metadata and gives the scores LiteRT gives on our ids,
    to a few of the int8 softmax's steps (MediaPipe tokenizes for itself: compared on the ASCII
    sentences, where its ids are ours), which keep the Keras model's top label."""
    from ai_edge_litert.interpreter import Interpreter

    from tests.export.test_tflite_metadata import run_mediapipe
    from tests.run_once import make_target

    error = make_target("mediapipe-venv")
    if error:
        pytest.fail(error)
    _, (*_, calibration_rows), (held_out, _, held_out_rows) = mr
    model, want = trained
    path = str(tmp_path / "model.keras")
    model.save(path)
    calibration = tmp_path / "calibration.csv"
    with open(calibration, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(calibration_rows)
    out = tmp_path / "export"
    assert (
        main(
            [
                "export",
                "--model",
                path,
                "--output",
                str(out),
                "--formats",
                "mediapipe",
                "--seq-len",
                str(LENGTH),
                "--quantizations",
                "int8_only",
                "--calibration",
                str(calibration),
                "--no-header",
                "--columns",
                "label,text",
            ]
        )
        == 0
    )
    file = out / "mediapipe" / "bert_int8_only.tflite"
    ascii_rows = [i for i, (_, text) in enumerate(held_out_rows) if text.isascii()]
    assert len(ascii_rows) > 250
    result = run_mediapipe(tmp_path, [held_out_rows[i][1] for i in ascii_rows], classify=[file])
    assert result["labels"][str(file)] == ["-1", "1"]
    theirs = np.asarray(result["classify"][str(file)])  # [N, 2], label id order
    runner = Interpreter(model_path=str(file)).get_signature_runner("serving_default")
    ours = run(runner, {k: v[ascii_rows] for k, v in held_out.items()})["probabilities"]
    # Not bit for bit: MediaPipe 0.10.21 bundles its own TFLite kernels, which round int8 ops
    # otherwise. The probabilities come out of TFLite's int8 softmax, whose scale is fixed at
    # 1/256: measured 3 of those steps at most between MediaPipe and LiteRT's XNNPACK, where
    # LiteRT's own reference kernels and XNNPACK differ by 2 on the same file.
    step = 1 / 256
    assert np.abs(theirs - ours).max() <= 4 * step, np.abs(theirs - ours).max()
    assert np.mean(theirs.argmax(-1) == ours.argmax(-1)) >= 0.99
    assert np.mean(theirs.argmax(-1) == want[ascii_rows].argmax(-1)) >= 0.97
