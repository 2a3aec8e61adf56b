"""bench/reference/classify_peers.py in .venv-peers on a bert_tiny classifier exported by
export_huggingface (the real MiniLM vocabulary, a random seeded head): every peer prepares, runs
16 MR sentences once and reports; fp32 peers' logits are transformers' within 1e-3, int8 peers'
near them, and the ONNX file is made once for the folder."""

import json
import os

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from bench.corpora.mr_split import load_mr, mr_split
from bench.reference.classify_peers import PEERS
from keras_bert_impl_export.huggingface import export_huggingface
from tests.conftest import DATA, REPO
from tests.side_venv import run_in_side_venv

# Seven child runs in .venv-peers (torch, transformers, ONNX Runtime, OpenVINO, NNCF), each about
# 15-25 s, most of it imports and the exports; make test-slow builds the venv.
pytestmark = pytest.mark.slow

CHILD = os.path.join(REPO, "bench", "reference", "classify_peers.py")
SENTENCES = 16
# Seen on this model: ONNX Runtime's dynamic int8 6e-3, NNCF's 2e-3 from fp32 logits.
INT8_LOGIT_TOLERANCE = 0.05


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(folder, sentences file, calibration file, work folder): the export, 16 held-out MR
    sentences and 16 training ones (the split of bench/corpora/mr_split.py)."""
    vocab_path = os.path.join(DATA, "minilm", "vocab.txt")
    if not os.path.exists(vocab_path):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    with open(vocab_path, encoding="utf-8") as f:
        vocabulary = [line.rstrip("\n") for line in f]
    root = tmp_path_factory.mktemp("peers")
    backbone = kb.BertBackbone.from_preset(
        "bert_tiny", vocabulary_size=len(vocabulary), max_sequence_length=128
    )
    backbone.set_vocabulary(vocabulary, lowercase=True)
    keras.utils.set_random_seed(3)
    folder = str(root / "tiny")
    export_huggingface(kb.BertClassifier(backbone, 2, label_names=["negative", "positive"]), folder)
    texts, labels = load_mr(os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv"))
    train_idx, test_idx = mr_split(texts, labels)
    sentences, calibration = root / "held_out.txt", root / "train.txt"
    sentences.write_text("\n".join(texts[i] for i in test_idx[:SENTENCES]) + "\n", encoding="utf-8")
    calibration.write_text("\n".join(texts[i] for i in train_idx[:SENTENCES]) + "\n", encoding="utf-8")
    return folder, str(sentences), str(calibration), str(root / "work")


@pytest.fixture(scope="module")
def reports(setup):
    """{peer: the child's JSON line}, the peers run one after another on one work folder."""
    folder, sentences, calibration, work = setup
    found = {}
    for peer in PEERS:
        out = run_in_side_venv(
            ".venv-peers",
            CHILD,
            "--model",
            folder,
            "--sentences",
            sentences,
            "--peer",
            peer,
            "--threads",
            "2",
            "--rounds",
            "1",
            "--latency-sentences",
            "8",
            "--check-sentences",
            str(SENTENCES),
            "--calibration",
            calibration,
            "--work",
            work,
        )
        found[peer] = json.loads(out.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize("peer", PEERS)
def test_each_peer_reports_a_run(reports, peer):
    report = reports[peer]
    assert report["peer"] == peer and report["sentences"] == SENTENCES and report["threads"] == 2
    assert len(report["labels"]) == SENTENCES and set(report["labels"]) <= {0, 1}
    assert len(report["sentences_per_second"]) == 1 and report["sentences_per_second"][0] > 0
    latency = report["latency_batch1_ms"]
    assert latency["sentences"] == 8 and 0 < latency["p50"] <= latency["p90"]
    assert report["load_seconds"] > 0 and report["peak_rss_mib"] >= report["rss_before_load_mib"] > 0
    check = report["check"]
    assert check["sentences"] == SENTENCES and check["tokenizer_ids_equal_autotokenizer"]
    if peer.endswith("fp32"):
        assert check["within_1e-3"], check
        assert check["top_labels_agree"] == SENTENCES
        assert report["labels"] == reports["pytorch_fp32"]["labels"]
    else:
        assert check["max_abs_logit_diff"] < INT8_LOGIT_TOLERANCE, check


def test_the_runtimes_were_set_up_as_documented(reports):
    steps = reports["onnxruntime_int8"]["prepare"]["steps"]
    assert {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"} <= set(
        steps["ort_fp32"]["fusions"]
    )
    assert steps["ort_int8"]["quantized_ops"]["MatMulInteger"] > 0
    assert not steps["ort_int8"]["quantization"]["per_channel"]
    per_channel = reports["onnxruntime_int8_per_channel"]["prepare"]["steps"]["ort_int8_per_channel"]
    assert per_channel["quantization"]["per_channel"] and per_channel["quantized_ops"]["MatMulInteger"] > 0
    int8_ir = [
        s
        for name, s in reports["openvino_int8"]["prepare"]["steps"].items()
        if name.startswith("openvino_int8")
    ]
    assert len(int8_ir) == 1 and int8_ir[0]["quantized_ops"]["FakeQuantize"] > 0
    assert int8_ir[0]["quantization"]["calibration_sentences"] == SENTENCES
    for peer in ("onnxruntime_fp32", "onnxruntime_int8", "onnxruntime_int8_per_channel"):
        assert reports[peer]["settings"]["intra_op_num_threads"] == 2
    for peer in ("openvino_fp32", "openvino_int8"):
        assert reports[peer]["settings"]["INFERENCE_NUM_THREADS"] == 2
    assert reports["pytorch_int8"]["settings"]["torch_threads"] == 2


def test_artifacts_are_made_once_per_folder(reports, setup):
    """onnxruntime_int8 reuses the ONNX file and optimized model onnxruntime_fp32 made (the same
    manifests), and openvino_int8 the IR of openvino_fp32; a second run makes nothing."""
    assert reports["onnxruntime_fp32"]["prepare"]["made_now"]
    for later, earlier, shared in (
        ("onnxruntime_int8", "onnxruntime_fp32", ("onnx", "ort_fp32")),
        ("onnxruntime_int8_per_channel", "onnxruntime_fp32", ("onnx", "ort_fp32")),
        ("openvino_int8", "openvino_fp32", ("openvino_fp32",)),
    ):
        for name in shared:
            assert reports[later]["prepare"]["steps"][name] == reports[earlier]["prepare"]["steps"][name]
    folder, sentences, calibration, work = setup
    out = run_in_side_venv(
        ".venv-peers",
        CHILD,
        "--model",
        folder,
        "--sentences",
        sentences,
        "--peer",
        "onnxruntime_int8",
        "--latency-sentences",
        "2",
        "--check-sentences",
        "2",
        "--work",
        work,
    )
    again = json.loads(out.strip().splitlines()[-1])
    assert not again["prepare"]["made_now"]
    assert again["prepare"]["steps"] == reports["onnxruntime_int8"]["prepare"]["steps"]
    np.testing.assert_array_equal(again["labels"], reports["onnxruntime_int8"]["labels"])


def test_serve_mode_answers_the_benchs_commands(reports, setup):
    """--serve (what bench/perf/cpu_peers.py runs for its interleaved rounds): one warm process
    answers two passes, a latency run and its closing facts, the same labels as a --rounds run."""
    folder, sentences, calibration, work = setup
    out = run_in_side_venv(
        ".venv-peers",
        CHILD,
        "--model",
        folder,
        "--sentences",
        sentences,
        "--peer",
        "onnxruntime_fp32",
        "--threads",
        "2",
        "--latency-sentences",
        "8",
        "--check-sentences",
        str(SENTENCES),
        "--calibration",
        calibration,
        "--work",
        work,
        "--serve",
        input="pass\npass\nlatency\ndone\n",
    )
    ready, first, second, latency, done = [
        json.loads(line) for line in out.strip().splitlines() if line.startswith("{")
    ]
    assert ready["ready"] is True and ready["load_seconds"] > 0 and ready["prepare"]["made_now"] is False
    assert first["labels"] == second["labels"] == reports["onnxruntime_fp32"]["labels"]
    assert first["seconds"] > 0 and second["seconds"] > 0
    assert latency["latency_batch1_ms"]["sentences"] == 8
    assert done["check"]["within_1e-3"] is True and done["peak_rss_mib"] > ready["rss_before_load_mib"]
