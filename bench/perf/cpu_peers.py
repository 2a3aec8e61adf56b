"""Raw MR text -> labels on a CPU: ours (fp32, bf16, int8) against the runtimes users pick for
speed (ONNX Runtime fp32 with its BERT fusions and dynamic int8, OpenVINO fp32 and NNCF int8,
PyTorch fp32 and dynamic int8), all on one fine-tuned classifier, in paired, interleaved rounds.

    .venv/bin/python -m bench.perf.cpu_peers --peers-python .venv-peers/bin/python \\
        --output bench/results/cpu_peers.json

The model: the real MiniLM-L6 fine-tuned here on the 3,200 training sentences of the demo's
80/20 MR split (`kbert finetune`, the pooled [CLS] head: the one transformers has), made by
this script under data/bench/cpu_peers/ when missing. Ours runs its `model.keras` through
`TextPredictor` (length-sorted batches of 32, each cut to its longest row, truncation at 128,
tokenization included; fp32, bf16 = `with_precision`, int8 = `Int8Forward`); every peer
loads its `kbert export --formats huggingface` folder (bench/reference/classify_peers.py in
.venv-peers says exactly what each peer does, tokenization included).

Every runtime is a child process of its own, started once (its load time and the peak
resident memory it reaches are its own), kept warm, and asked over stdin for one timed pass
over the 4,000 MR sentences per round; a round asks each runtime once, in an order rotated
from round to round, so a busy moment on a shared machine slows one round for all of them.
Then batch-1 latency (p50/p90 over 200 sentences, one call each, tokenization included).
Accuracy is each runtime's on the 800 held-out sentences (labels from its last pass), beside
its speed. Ratios: ours over the fastest peer of the same precision, per round (median and
spread), fp32 against fp32 peers, int8 against int8 ones.

The protocol (both children): after loading and a warm-up the child prints one JSON line
{"ready": true, "load_seconds", ...}; then for each line on stdin: "pass" -> {"seconds",
"labels"}; "latency" -> {"latency_batch1_ms": {p50, p90, mean, sentences}}; "done" -> its
closing facts ({"peak_rss_mib", ...}) and exit.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

from bench.common import REPO, WORK, kbert, machine_info, wait_for_idle, write_report

FOLDER = os.path.join(WORK, "cpu_peers")
OURS = ("ours_fp32", "ours_bf16", "ours_int8")
PEERS = ("onnxruntime_fp32", "onnxruntime_int8", "onnxruntime_int8_per_channel", "openvino_fp32", "openvino_int8",
         "pytorch_fp32", "pytorch_int8")
INT8 = ("ours_int8", "onnxruntime_int8", "onnxruntime_int8_per_channel", "openvino_int8", "pytorch_int8")
LATENCY_SENTENCES = 200
CALIBRATION_SENTENCES = 300


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def onednn_on():
    """Whether this process's TensorFlow runs its oneDNN kernels (keras_bert_impl turns them on
    for x86 CPUs where TensorFlow's own default is Eigen's; TF_ENABLE_ONEDNN_OPTS overrides)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def _latency(call, texts):
    for text in texts[:10]:
        call([text])
    times = []
    for text in texts:
        start = time.perf_counter()
        call([text])
        times.append(1000 * (time.perf_counter() - start))
    return {"sentences": len(texts), "p50": float(np.percentile(times, 50)), "p90": float(np.percentile(times, 90)),
            "mean": float(np.mean(times))}


def ours_child(run, precision, sentences_path):
    """One of our precisions behind the protocol (module docstring)."""
    import keras_bert_impl  # noqa: F401  (first, as `kbert` does: it sets oneDNN's switch before TensorFlow loads)
    import keras

    from keras_bert_impl.inference import TextPredictor, with_precision

    with open(sentences_path, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    # As the peers count them: the process after its imports, then loading until ready to run.
    rss_before = _peak_rss_mib()
    start = time.perf_counter()
    model = keras.saving.load_model(os.path.join(run, "model.keras"))
    # bf16: the model rebuilt under mixed_bfloat16; int8: TextPredictor converts it (timed here).
    predictor = TextPredictor(with_precision(model, precision) if precision == "bf16" else model, sequence_length=128,
                              batch_size=32, precision="int8" if precision == "int8" else "fp32")
    load_seconds = time.perf_counter() - start

    def labels(chunk):
        return predictor.predict(chunk)["logits"].argmax(-1)

    start = time.perf_counter()
    labels(texts[:256])
    print(json.dumps({"ready": True, "load_seconds": load_seconds, "warm_up_seconds": time.perf_counter() - start,
                      "rss_before_load_mib": rss_before, "onednn_on": onednn_on()}), flush=True)
    for command in sys.stdin:
        command = command.strip()
        if command == "pass":
            start = time.perf_counter()
            predicted = labels(texts)
            print(json.dumps({"seconds": time.perf_counter() - start, "labels": predicted.tolist()}), flush=True)
        elif command == "latency":
            print(json.dumps({"latency_batch1_ms": _latency(labels, texts[:LATENCY_SENTENCES])}), flush=True)
        elif command == "done":
            print(json.dumps({"peak_rss_mib": _peak_rss_mib()}), flush=True)
            return


class _Child:
    """A runtime's warm child process, asked one command at a time."""

    def __init__(self, name, command, log_folder, env=None):
        self.name = name
        print(f"+ {name}: {' '.join(command)}", flush=True)
        self.log = os.path.join(log_folder, f"{name}.stderr")
        with open(self.log, "w") as stderr:
            self.process = subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=stderr, text=True, env=env)
        self.ready = self._reply()

    def _reply(self):
        while True:
            line = self.process.stdout.readline()
            if not line:
                code = self.process.wait()
                with open(self.log, encoding="utf-8", errors="replace") as f:
                    tail = f.read()[-1500:]
                raise RuntimeError(f"{self.name} exited with {code} before answering; its stderr ends:\n{tail}")
            line = line.strip()
            if line.startswith("{"):
                return json.loads(line)

    def ask(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._reply()

    def close(self):
        facts = self.ask("done")
        self.process.wait(timeout=120)
        return facts


def interleaved_passes(children, rounds, sentences):
    """Asks every child for one "pass" per round, the order rotated from round to round:
    ({name: [seconds per round]}, {name: labels of its last pass})."""
    seconds = {name: [] for name in children}
    predicted = {}
    for round_ in range(rounds):
        order = list(children)[round_ % len(children):] + list(children)[: round_ % len(children)]
        for name in order:
            reply = children[name].ask("pass")
            seconds[name].append(reply["seconds"])
            predicted[name] = np.asarray(reply["labels"])
            print(f"round {round_ + 1}: {name} {sentences / reply['seconds']:.1f} sentences/s", flush=True)
    return seconds, predicted


def _prepare(folder):
    """The split, the fine-tuned run and its Hugging Face export, each made once."""
    from bench.corpora.mr_split import write_mr_split

    texts, labels, train_idx, test_idx, train_csv, test_csv = write_mr_split(folder)
    minilm = os.path.join(folder, "minilm.keras")
    if not os.path.exists(minilm):
        kbert("convert", os.path.join(REPO, "data", "minilm"), "--format", "huggingface", "--output", minilm)
    run = os.path.join(folder, "mr_pooled")
    if not os.path.exists(os.path.join(run, "model.keras")):
        kbert("finetune", "--task", "classification", "--init", minilm, "--train", train_csv, "--validation", test_csv,
              "--no-header", "--columns", "label,text", "--seq-len", "128", "--epochs", "2", "--batch-size", "32",
              "--learning-rate", "1e-4", "--output", run, "--quiet")
    hf = os.path.join(folder, "mr_pooled_hf")
    if not os.path.exists(os.path.join(hf, "config.json")):
        kbert("export", "--model", run, "--formats", "huggingface", "--output", hf)
    sentences = os.path.join(folder, "mr_sentences.txt")
    with open(sentences, "w", encoding="utf-8") as f:
        f.writelines(text.replace("\n", " ") + "\n" for text in texts)
    calibration = os.path.join(folder, "calibration.txt")
    with open(calibration, "w", encoding="utf-8") as f:
        f.writelines(texts[i].replace("\n", " ") + "\n" for i in train_idx[:CALIBRATION_SENTENCES])
    return texts, labels, test_idx, run, hf, sentences, calibration


def _summary(values):
    values = np.asarray(values, float)
    return {"median": float(np.median(values)), "min": float(values.min()), "max": float(values.max())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers-python", default=os.path.join(REPO, ".venv-peers", "bin", "python"),
                        help="Python of .venv-peers (make peers-venv).")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runtimes", default=",".join(OURS + PEERS), help="Comma-separated subset to run.")
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "cpu_peers.json"))
    # The child modes (this script runs itself as the children of ours).
    parser.add_argument("--ours-child", choices=("fp32", "bf16", "int8"), help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--sentences", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ours_child:
        return ours_child(args.run, args.ours_child, args.sentences)
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    unknown = sorted(set(runtimes) - set(OURS + PEERS))
    if unknown or args.rounds < 1:
        raise SystemExit(f"--runtimes takes a subset of {','.join(OURS + PEERS)} (unknown: {unknown}); --rounds >= 1.")
    texts, labels, test_idx, run, hf, sentences, calibration = _prepare(FOLDER)
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)

    children, failed = {}, {}
    for name in runtimes:
        if name in OURS:
            command = [sys.executable, "-m", "bench.perf.cpu_peers", "--ours-child", name[len("ours_"):], "--run", run,
                       "--sentences", sentences]
        else:
            command = [args.peers_python, "-m", "bench.reference.classify_peers", "--serve", "--model", hf,
                       "--sentences", sentences, "--peer", name, "--threads", "2", "--calibration", calibration,
                       "--latency-sentences", str(LATENCY_SENTENCES)]
        try:
            children[name] = _Child(name, command, FOLDER)
        except RuntimeError as error:  # a peer that will not run here is listed with its error
            failed[name] = str(error)
    seconds, predicted = interleaved_passes(children, args.rounds, len(texts))
    latency = {name: child.ask("latency")["latency_batch1_ms"] for name, child in children.items()}
    closing = {name: child.close() for name, child in children.items()}

    with open(os.path.join(hf, "config.json"), encoding="utf-8") as f:
        label2id = json.load(f)["label2id"]  # the run's label names ("-1", "1") to the ids every side predicts
    truth = np.array([label2id[str(label)] for label in labels[test_idx]])
    rows = {}
    for name, child in children.items():
        per_round = [len(texts) / s for s in seconds[name]]
        rows[name] = {
            "sentences_per_second": per_round, "sentences_per_second_summary": _summary(per_round),
            "accuracy_800_held_out": float(np.mean(predicted[name][test_idx] == truth)),
            "latency_batch1_ms": latency[name],
            **{k: v for k, v in child.ready.items() if k != "ready"}, **closing[name],
        }
    ratios = {}
    for ours, peers in (("ours_fp32", [p for p in children if p not in OURS and p not in INT8]),
                        ("ours_int8", [p for p in children if p in INT8 and p not in OURS])):
        if ours not in children or not peers:
            continue
        fastest = max(peers, key=lambda p: np.median(rows[p]["sentences_per_second"]))
        per_round = [a / b for a, b in zip(rows[ours]["sentences_per_second"], rows[fastest]["sentences_per_second"])]
        ratios[f"{ours}_over_{fastest}"] = {"per_round": per_round, **_summary(per_round),
                                            "accuracy_points": 100 * (rows[ours]["accuracy_800_held_out"]
                                                                      - rows[fastest]["accuracy_800_held_out"])}
    results = {"sentences": len(texts), "held_out": len(test_idx), "rounds": args.rounds, "threads": 2,
               "batch_size": 32, "truncation": 128, "model": os.path.relpath(run, REPO), "runtimes": rows,
               "failed": failed, "ratios": ratios}
    write_report(args.output, "cpu_peers", results, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
