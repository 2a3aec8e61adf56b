"""android_demo/'s app logic on the JVM, held to the Python pipeline, and the app's contract
with what `kbert export` writes.

No APK can be built here (no Android SDK; no Maven repository is reachable), so everything
in the app that is not Android glue is plain Java under android_demo/app/src/main/java/
org/kerasbertimpl/edgedemo/logic/: WordPiece tokenization and packing (the LiteRT path),
export.json reading, softmax, label mapping and threshold, result strings, input limits and
the latest-only prediction runner. This module compiles those sources and their JUnit 4 tests
(android_demo/app/src/test/java/...) with the JDK and runs them against golden vectors it
computes from the real pipeline: BertPreprocessor's ids for every hard case of
tests/fixtures/tokenization_hard_cases.json (pairs included), for all 4,000 MR sentences and
for the bad input (10,000 characters, emoji, a script the vocabulary lacks), and the Keras
model's logits and probabilities for 20 held-out MR sentences. The contract test reads the
app's expectations (ExportContract, printed as JSON by the JVM) and checks them against a
real export: files, tensor names, shapes, dtypes and MediaPipe metadata.
"""

import json
import os
import re
import subprocess

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from keras_bert_impl.tokenization.char_table import build_table
from keras_bert_impl_export.tflite_metadata import read_metadata
from tests.export.edge_reference import CHAR_TABLE, REPO

pytestmark = pytest.mark.slow

APP = os.path.join(REPO, "android_demo", "app")
MAIN_JAVA = os.path.join(APP, "src", "main", "java")
TEST_JAVA = os.path.join(APP, "src", "test", "java")
PACKAGE = "org.kerasbertimpl.edgedemo.logic"
JUNIT_CLASSPATH = ["/usr/share/java/junit4.jar", "/usr/share/java/hamcrest-core.jar"]


@pytest.fixture(scope="module")
def jvm_classes(edge_setup, tmp_path_factory):
    """The app logic and its tests compiled with javac (-Werror: lint warnings fail too)."""
    out = tmp_path_factory.mktemp("jvm")
    sources = []
    for root in (MAIN_JAVA, TEST_JAVA):
        for folder, _, files in os.walk(root):
            sources += [os.path.join(folder, f) for f in files if f.endswith(".java")]
    done = subprocess.run(
        [
            "javac",
            "-Xlint:all",
            "-Werror",
            "--release",
            "11",
            "-encoding",
            "UTF-8",
            "-d",
            str(out),
            "-cp",
            ":".join(JUNIT_CLASSPATH),
            *sorted(sources),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return str(out)


def java(classes, *args, properties=None):
    command = [
        "java",
        *(f"-D{k}={v}" for k, v in (properties or {}).items()),
        "-cp",
        ":".join([classes, *JUNIT_CLASSPATH]),
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_char_table_is_the_pipelines(mr_export):
    """The committed bert_unicode.txt is what the generator writes today (from the export's vocabulary)."""
    with open(CHAR_TABLE, encoding="utf-8") as f:
        committed = f.read()
    regenerated = build_table(os.path.join(mr_export, "vocab.txt"))
    assert committed == regenerated, (
        "android_demo/app/src/main/assets/bert_unicode.txt is stale: run "
        "`.venv/bin/python -m keras_bert_impl.tokenization.char_table --output "
        "android_demo/app/src/main/assets/bert_unicode.txt` (and `make web-demo`)."
    )


def test_app_logic_passes_its_jvm_tests_on_the_golden_vectors(jvm_classes, edge_golden, mr_export):
    test_classes = sorted(
        f"{PACKAGE}.{name[:-5]}"
        for name in os.listdir(os.path.join(TEST_JAVA, *PACKAGE.split(".")))
        if name.endswith("Test.java")
    )
    assert len(test_classes) >= 7, test_classes
    done = java(
        jvm_classes,
        "org.junit.runner.JUnitCore",
        *test_classes,
        properties={"golden": edge_golden, "export": mr_export},
    )
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    ran = re.search(r"^OK \((\d+) tests\)", done.stdout, re.MULTILINE)
    assert ran and int(ran.group(1)) >= 20, done.stdout[-2000:]
    assert "MR sentences with ids equal to BertPreprocessor's: 4000 of 4000" in done.stdout
    assert re.search(r"codepoints with ids equal to BertPreprocessor's: (\d+) of \1", done.stdout)


def _signature_details(path):
    interpreter = Interpreter(model_path=path)
    runner = interpreter.get_signature_runner("serving_default")
    return interpreter.get_signature_list(), runner.get_input_details(), runner.get_output_details()


def test_app_contract_is_what_kbert_export_writes(jvm_classes, mr_export):
    done = java(jvm_classes, f"{PACKAGE}.ExportContract")
    assert done.returncode == 0, done.stderr
    contract = json.loads(done.stdout)
    with open(os.path.join(mr_export, contract["manifest"]), encoding="utf-8") as f:
        manifest = json.load(f)
    with open(os.path.join(mr_export, contract["labels"]), encoding="utf-8") as f:
        labels = f.read().splitlines()
    with open(os.path.join(mr_export, contract["vocabulary"]), encoding="utf-8") as f:
        vocabulary = f.read().splitlines()
    assert manifest["head"] == contract["head"] and manifest["pair"] is False
    assert manifest["id_inputs"] == contract["id_inputs"]
    assert manifest["label_names"] == labels
    assert os.path.isfile(os.path.join(APP, "src", "main", "assets", contract["char_table"]))

    for key in (contract["litert_float32"], contract["litert_int8"]):
        signatures, inputs, outputs = _signature_details(os.path.join(mr_export, manifest["files"][key]))
        assert list(signatures) == [contract["signature"]], key
        assert sorted(inputs) == sorted(contract["id_inputs"]), key
        for name, detail in inputs.items():
            assert detail["dtype"] == np.dtype(contract["input_dtype"]), (key, name)
            # Any batch and length: the app resizes to [1, sequence_length].
            assert list(detail["shape_signature"]) == [-1, -1], (key, name, detail["shape_signature"])
        assert sorted(outputs) == sorted(contract["litert_outputs"]), key
        for name, detail in outputs.items():
            assert detail["dtype"] == np.dtype(contract["output_dtype"]), (key, name)
            assert list(detail["shape_signature"]) == [-1, len(labels)], (key, name)

    for key in (contract["mediapipe_float32"], contract["mediapipe_int8"]):
        path = os.path.join(mr_export, manifest["files"][key])
        signatures, inputs, outputs = _signature_details(path)
        assert sorted(inputs) == sorted(contract["id_inputs"]) and list(outputs) == [
            contract["probabilities"]
        ]
        for name, detail in inputs.items():
            assert detail["dtype"] == np.dtype(contract["input_dtype"])
            assert list(detail["shape"]) == [contract["mediapipe_batch"], manifest["sequence_length"]], (
                key,
                name,
            )
        with open(path, "rb") as f:
            metadata = read_metadata(f.read())
        assert metadata["kind"] == "classifier"
        assert [unit["type"] for unit in metadata["input_process_units"]] == [
            contract["mediapipe_tokenizer_unit"]
        ]
        assert [v["name"] for v in metadata["input_process_units"][0]["vocab_files"]] == [
            contract["vocabulary"]
        ]
        assert metadata["vocabulary"] == vocabulary
        (output,) = metadata["outputs"]
        assert output["name"] == contract["probabilities"] and output["shape"] == [1, len(labels)]
        assert [(a["name"], a["type"]) for a in output["associated_files"]] == [
            (contract["labels"], contract["mediapipe_labels_type"])
        ]
        assert metadata["label_names"] == labels

    # The Gradle task that bundles the export copies exactly the contract's files.
    with open(os.path.join(APP, "build.gradle.kts"), encoding="utf-8") as f:
        gradle = f.read()
    listed = re.search(r"val bundledFileKeys = listOf\(([^)]*)\)", gradle)
    assert listed, "app/build.gradle.kts lost its bundledFileKeys list"
    assert re.findall(r'"([^"]+)"', listed.group(1)) == contract["bundled_file_keys"]
    assert f'dir("src/main/assets/{contract["asset_dir"]}")' in gradle
