"""The SavedModel a team puts behind TF Serving, one sentence a request: its ids signature's batch-1
p50 in TensorFlow's own loader (`tf.saved_model.load`, what TF Serving runs) against ONNX Runtime
fp32 (bench/reference/classify_peers.py's optimized BERT graph, 2 threads) on the same fine-tuned
MiniLM (bench/perf/cpu_peers.py's MR run) and the same token ids: padded to the export's length (the
export report's batch-1 column feeds the ids so) and at each sentence's own length. Each side is a
fresh child per round, the rounds interleaved (the order swapped every round). The TensorFlow child
imports TensorFlow alone, so it runs with TensorFlow's own defaults (oneDNN's graph rewrites as
TensorFlow picks them for the CPU), as TF Serving does, not with `kbert`'s TF_ENABLE_ONEDNN_OPTS.

    .venv/bin/python -m bench.perf.saved_model_batch1 --rounds 5 \\
        --output bench/results/saved_model_batch1.json
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from bench.common import (
    REPO,
    WORK,
    kbert,
    load_warnings,
    machine_info,
    read_loadavg,
    run_json_child,
    wait_for_idle,
    write_report,
)

FOLDER = os.path.join(WORK, "cpu_peers")
WARM_UP_CALLS = 5
TARGET = 2.0  # issue 54: the SavedModel's batch-1 at most 2x ONNX Runtime fp32's


def _rows(ids_path):
    with open(ids_path, encoding="utf-8") as f:
        return json.load(f)


def _padded(row, width):
    """One id row -> ([1, width] ids, [1, width] mask), int64."""
    ids = np.zeros((1, width), np.int64)
    mask = np.zeros((1, width), np.int64)
    ids[0, : len(row)] = row
    mask[0, : len(row)] = 1
    return ids, mask


def time_calls(call, rows, width):
    """p50 ms of call(ids, mask) over every row, at `width` (None: the row's own length)."""
    for row in rows[:WARM_UP_CALLS]:
        call(*_padded(row, width or len(row)))
    seconds = []
    for row in rows:
        ids, mask = _padded(row, width or len(row))
        started = time.perf_counter()
        call(ids, mask)
        seconds.append(time.perf_counter() - started)
    return 1000 * float(np.percentile(seconds, 50))


def tensorflow_call(saved_model):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    function = tf.saved_model.load(os.path.join(saved_model, "serving", "bert_ids", "1")).signatures[
        "serving_default"
    ]

    def call(ids, mask):
        ids = tf.constant(ids.astype(np.int32))
        return function(ids=ids, mask=tf.constant(mask.astype(np.int32)), segment_ids=tf.zeros_like(ids))

    return call


def onnxruntime_call(hf):
    from bench.reference.classify_peers import _fingerprint, load, prepare

    work = os.path.join(WORK, "peers", _fingerprint(hf))
    os.makedirs(work, exist_ok=True)
    prepare("onnxruntime_fp32", hf, work, 2, None)
    forward, _ = load("onnxruntime_fp32", hf, work, 2, None)
    return lambda ids, mask: forward(
        {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    )


def child(side, model, ids_path, width):
    """One side's p50s as one JSON line."""
    call = tensorflow_call(model) if side == "tensorflow" else onnxruntime_call(model)
    rows = _rows(ids_path)
    print(
        json.dumps(
            {"export_length": time_calls(call, rows, width), "own_length": time_calls(call, rows, None)}
        )
    )


def write_ids(peers_python, hf, sentences, count, width, path):
    """The first `count` sentences' ids by the Hugging Face export's tokenizer (both sides get these)."""
    code = (
        "import json, sys; from bench.reference.classify_peers import _tokenizer; "
        "t = _tokenizer(sys.argv[1], int(sys.argv[3])); "
        "texts = [l.strip() for l in open(sys.argv[2], encoding='utf-8')][: int(sys.argv[4])]; "
        "json.dump([e.ids for e in t.encode_batch(texts)], open(sys.argv[5], 'w'))"
    )
    subprocess.run(
        [peers_python, "-c", code, hf, sentences, str(width), str(count), path], check=True, cwd=REPO
    )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:
        return child(argv[1], argv[2], argv[3], int(argv[4]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=100, help="MR sentences, one call each per pass.")
    parser.add_argument("--peers-python", default=os.path.join(REPO, ".venv-peers", "bin", "python"))
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "saved_model_batch1.json"))
    args = parser.parse_args(argv)
    from bench.perf.cpu_peers import _prepare

    _, _, _, run, hf, sentences, _ = _prepare(FOLDER)
    saved_model = os.path.join(FOLDER, "mr_pooled_saved_model")
    if not os.path.isdir(os.path.join(saved_model, "serving", "bert_ids")):
        kbert("export", "--model", run, "--formats", "saved_model", "--output", saved_model)
    with open(os.path.join(saved_model, "export.json"), encoding="utf-8") as f:
        width = json.load(f)["sequence_length"]
    ids_path = os.path.join(FOLDER, f"batch1_ids_{args.sentences}.json")
    write_ids(args.peers_python, hf, sentences, args.sentences, width, ids_path)
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    load_before = read_loadavg()
    sides = {
        "tensorflow_saved_model": [
            sys.executable,
            "-m",
            "bench.perf.saved_model_batch1",
            "--child",
            "tensorflow",
            saved_model,
        ],
        "onnxruntime_fp32": [
            args.peers_python,
            "-m",
            "bench.perf.saved_model_batch1",
            "--child",
            "onnxruntime",
            hf,
        ],
    }
    per_round = {name: [] for name in sides}
    for round_index in range(args.rounds):
        order = list(sides) if round_index % 2 == 0 else list(sides)[::-1]
        for name in order:
            per_round[name].append(run_json_child([*sides[name], ids_path, str(width)]))
    summary = {
        name: {
            condition: float(np.median([r[condition] for r in rounds]))
            for condition in ("export_length", "own_length")
        }
        for name, rounds in per_round.items()
    }
    ratios = {
        condition: summary["tensorflow_saved_model"][condition] / summary["onnxruntime_fp32"][condition]
        for condition in ("export_length", "own_length")
    }
    results = {
        "settings": {
            "rounds": args.rounds,
            "sentences": args.sentences,
            "export_length": width,
            "threads": 2,
        },
        "per_round_ms": per_round,
        "p50_ms_median_of_rounds": summary,
        "ratio_saved_model_to_onnxruntime": ratios,
        "target": f"<= {TARGET}x at the export's length (the export report's conditions)",
        "holds": ratios["export_length"] <= TARGET,
        "loadavg_before": load_before,
        "loadavg_after": read_loadavg(),
        "warnings": load_warnings(load_before, read_loadavg(), "idle"),
    }
    write_report(args.output, "saved_model_batch1", results, machine)
    print(json.dumps({"p50_ms": summary, "ratios": ratios}, indent=1))


if __name__ == "__main__":
    main()
