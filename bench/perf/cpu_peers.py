"""Raw MR text -> labels on a CPU: ours (fp32, bf16, int8) against the runtimes users pick for
speed (ONNX Runtime fp32 with its BERT fusions and dynamic int8, OpenVINO fp32 and NNCF int8,
PyTorch fp32 and dynamic int8), all on one fine-tuned classifier, in paired, interleaved rounds.

    .venv/bin/python -m bench.perf.cpu_peers --peers-python .venv-peers/bin/python \\
        --output bench/results/cpu_peers.json

The model: the real MiniLM-L6 fine-tuned here on the 3,200 training sentences of the demo's
80/20 MR split (`kbert finetune`, the pooled [CLS] head: the one transformers has), made by
this script under data/bench/cpu_peers/ when missing. Ours runs its `model.keras` through
`TextPredictor` (length-sorted batches of 32, each cut to its longest row, truncation at 128,
tokenization included; fp32, bf16 = `with_precision`, int8 = `LiteRtForward`; `ours_fp32_litert`:
fp32 on the litert runtime, `TextPredictor(runtime="litert")` (`kbert predict --runtime litert`),
the classifier's float32 TFLite on XNNPACK); every peer
loads its `kbert export --formats huggingface` folder (bench/reference/classify_peers.py in
.venv-peers says exactly what each peer does, tokenization included).

Every runtime is a child process of its own, started once (its load time and the peak
resident memory it reaches are its own; ours' children with KBERT_CACHE_DIR=off, so int8's and
litert's load time includes converting the model, as every entry here measured it, which a
later process of a user's skips (inference/litert_cache.py; precision_process.py measures both),
while the peers load files converted at preparation), kept warm, and asked over stdin for one timed pass
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

Every kind of CPU in one file: the results file holds one run per CPU kind (`runs`, keyed by
`CpuFeatures.describe()`: the model and which of AVX2, AVX-512, VNNI, BF16, AMX it has), and
a run replaces only its own CPU kind's entry, so an AVX2-only machine's run and an AVX-512
one's sit side by side.

On a CPU with AVX-512 the run adds our oneDNN precisions (fp32, bf16) again with TensorFlow's
oneDNN capped at AVX2 (`ONEDNN_MAX_CPU_ISA=AVX2` in those children's environment:
`ours_fp32_onednn_avx2`, `ours_bf16_onednn_avx2`), and checks that the cap takes effect: a
short child per precision, native and capped, runs 64 sentences with `ONEDNN_VERBOSE=1` and
the run records the ISA oneDNN reports and the implementation of every primitive it ran
(`onednn_dispatch`); a capped run whose oneDNN still reports or dispatches AVX-512 stops the
bench. Nothing else is capped: ours int8 runs on LiteRT's XNNPACK, and ONNX Runtime (MLAS),
OpenVINO and PyTorch pick their kernels from the CPU's own features, with no such variable in
their children; every figure but the capped rows is native to the CPU.
"""

import argparse
import collections
import json
import os
import resource
import signal
import subprocess
import sys
import time

import numpy as np

from bench.common import (
    REPO,
    WORK,
    cpu_features_class,
    kbert,
    machine_info,
    read_loadavg,
    report_header,
    wait_for_idle,
)

FOLDER = os.path.join(WORK, "cpu_peers")
OURS = ("ours_fp32", "ours_bf16", "ours_int8", "ours_fp32_litert")
PEERS = (
    "onnxruntime_fp32",
    "onnxruntime_int8",
    "onnxruntime_int8_per_channel",
    "openvino_fp32",
    "openvino_int8",
    "pytorch_fp32",
    "pytorch_int8",
)
INT8 = ("ours_int8", "onnxruntime_int8", "onnxruntime_int8_per_channel", "openvino_int8", "pytorch_int8")
# Our oneDNN precisions again with TensorFlow's oneDNN capped at AVX2 (only where the CPU has
# AVX-512: below it the cap changes nothing). int8 is not among them: LiteRT's XNNPACK runs it,
# which ONEDNN_MAX_CPU_ISA does not reach.
CAP_ISA = "AVX2"
CAPPED = {"ours_fp32_onednn_avx2": "fp32", "ours_bf16_onednn_avx2": "bf16"}
CHECK_SENTENCES = 64
LATENCY_SENTENCES = 200
CALIBRATION_SENTENCES = 300


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def onednn_on():
    """Whether this process's TensorFlow runs its oneDNN kernels (keras_bert_impl turns them on
    for x86 CPUs where TensorFlow's own default is Eigen's; TF_ENABLE_ONEDNN_OPTS overrides)."""
    from keras_bert_impl.inference.onednn_forms import onednn_enabled

    return onednn_enabled()


def _latency(call, texts):
    for text in texts[:10]:
        call([text])
    times = []
    for text in texts:
        start = time.perf_counter()
        call([text])
        times.append(1000 * (time.perf_counter() - start))
    return {
        "sentences": len(texts),
        "p50": float(np.percentile(times, 50)),
        "p90": float(np.percentile(times, 90)),
        "mean": float(np.mean(times)),
    }


def ours_child(run, precision, sentences_path):
    """One of our precisions behind the protocol (module docstring)."""
    # First, as `kbert` does: it sets oneDNN's switch before TensorFlow loads.
    import keras_bert_impl  # noqa: F401
    import keras

    from keras_bert_impl.inference import TextPredictor

    with open(sentences_path, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    # As the peers count them: the process after its imports, then loading until ready to run.
    rss_before = _peak_rss_mib()
    start = time.perf_counter()
    model = keras.saving.load_model(os.path.join(run, "model.keras"))
    # bf16: the model rebuilt under mixed_bfloat16; int8: converted (both by TextPredictor, timed here).
    predictor = TextPredictor(
        model,
        sequence_length=128,
        batch_size=32,
        precision=precision.removesuffix("_litert"),
        runtime="litert" if precision == "fp32_litert" else None,
    )
    load_seconds = time.perf_counter() - start

    def labels(chunk):
        return predictor.predict(chunk)["logits"].argmax(-1)

    start = time.perf_counter()
    labels(texts[:256])
    print(
        json.dumps(
            {
                "ready": True,
                "load_seconds": load_seconds,
                "warm_up_seconds": time.perf_counter() - start,
                "rss_before_load_mib": rss_before,
                "onednn_on": onednn_on(),
            }
        ),
        flush=True,
    )
    for command in sys.stdin:
        command = command.strip()
        if command == "pass":
            start = time.perf_counter()
            predicted = labels(texts)
            print(
                json.dumps({"seconds": time.perf_counter() - start, "labels": predicted.tolist()}), flush=True
            )
        elif command == "latency":
            print(json.dumps({"latency_batch1_ms": _latency(labels, texts[:LATENCY_SENTENCES])}), flush=True)
        elif command == "done":
            print(json.dumps({"peak_rss_mib": _peak_rss_mib()}), flush=True)
            return


def onednn_check_child(run, precision, sentences_path):
    """Runs `precision` over CHECK_SENTENCES sentences and exits: the parent sets ONEDNN_VERBOSE=1
    (and the cap) in this child's environment and reads oneDNN's lines from its stdout."""
    import keras_bert_impl  # noqa: F401  (first: oneDNN's switch, as in ours_child)
    import keras
    import tensorflow as tf

    from keras_bert_impl.inference import TextPredictor

    # oneDNN prints its ISA line when it makes its first primitive: one fp32 product first, so the
    # line is there even where the precision's own first kernel crashes.
    tf.matmul(tf.ones([8, 8]), tf.ones([8, 8]))
    with open(sentences_path, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f][:CHECK_SENTENCES]
    model = keras.saving.load_model(os.path.join(run, "model.keras"))
    predictor = TextPredictor(
        model, sequence_length=128, batch_size=32, precision="bf16" if precision == "bf16" else "fp32"
    )
    predictor.predict(texts)


def parse_onednn_verbose(stdout):
    """oneDNN's verbose lines -> {"isa": the CPU ISA it says it dispatches to (its `info,cpu,isa:`
    line), "implementations": {primitive:implementation: primitives run}}; an empty
    implementation (the sgemm API names none) is "primitive:unnamed"."""
    isa, implementations = None, collections.Counter()
    for line in stdout.splitlines():
        fields = line.strip().split(",")
        if not fields or fields[0] != "onednn_verbose":
            continue
        if "isa:" in line and "info" in fields:
            isa = line.split("isa:", 1)[1].strip()
        elif len(fields) > 6 and fields[2:4] == ["primitive", "exec"]:
            implementations[f"{fields[5]}:{fields[6] or 'unnamed'}"] += 1
    return {"isa": isa, "implementations": dict(sorted(implementations.items()))}


def onednn_dispatch(run, sentences, precision, cap=None):
    """What TensorFlow's oneDNN ran for `precision` in a child with ONEDNN_VERBOSE=1 and, with
    `cap`, ONEDNN_MAX_CPU_ISA=cap: parse_onednn_verbose's record, the child's exit code, and the
    end of its stderr where it failed."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1"}
    if cap:
        env["ONEDNN_MAX_CPU_ISA"] = cap
    command = [
        sys.executable,
        "-m",
        "bench.perf.cpu_peers",
        "--onednn-check",
        precision,
        "--run",
        run,
        "--sentences",
        sentences,
    ]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    record = {
        "precision": precision,
        "ONEDNN_MAX_CPU_ISA": cap,
        **parse_onednn_verbose(done.stdout),
        "returncode": done.returncode,
    }
    if done.returncode < 0:
        record["signal"] = signal.Signals(-done.returncode).name
    if done.returncode != 0:
        record["stderr_tail"] = done.stderr[-600:]
    return record


def cap_took_effect(record, cap=CAP_ISA):
    """Whether a capped check's oneDNN said it dispatches to `cap` and ran no AVX-512 kernel."""
    isa = (record["isa"] or "").lower()
    return (
        cap.lower() in isa.replace("-", "")
        and "avx-512" not in isa
        and not any("avx512" in name for name in record["implementations"])
    )


def results_by_cpu(path, report):
    """The results file's content with `report` (one run: header and results) as its CPU
    kind's entry: {"benchmark", "runs": {CPU kind: report}}. A file of the earlier form (one
    run at the top level) becomes the entry of its own CPU kind, unchanged. The benchmark's
    name is the report's."""

    def kind(run):
        return cpu_features_class()(run["machine"]["cpu_model"], run["machine"]["cpu_simd"]).describe()

    runs = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            earlier = json.load(f)
        runs = earlier["runs"] if "runs" in earlier else {kind(earlier): earlier}
    runs[kind(report)] = report
    return {"benchmark": report["benchmark"], "runs": runs}


class _Child:
    """A runtime's warm child process, asked one command at a time."""

    def __init__(self, name, command, log_folder, env=None):
        self.name = name
        print(f"+ {name}: {' '.join(command)}", flush=True)
        self.log = os.path.join(log_folder, f"{name}.stderr")
        with open(self.log, "w") as stderr:
            self.process = subprocess.Popen(
                command,
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
            )
        self.ready = self._reply()

    def _reply(self):
        while True:
            line = self.process.stdout.readline()
            if not line:
                code = self.process.wait()
                with open(self.log, encoding="utf-8", errors="replace") as f:
                    tail = f.read()[-1500:]
                raise RuntimeError(
                    f"{self.name} exited with {code} before answering; its stderr ends:\n{tail}"
                )
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


def interleaved_passes(children, rounds, sentences, loads=None):
    """Asks every child for one "pass" per round, the order rotated from round to round:
    ({name: [seconds per round]}, {name: labels of its last pass}). `loads`, a list, gets the
    1-, 5- and 15-minute load averages at the end of each round."""
    seconds = {name: [] for name in children}
    predicted = {}
    for round_ in range(rounds):
        order = list(children)[round_ % len(children) :] + list(children)[: round_ % len(children)]
        for name in order:
            reply = children[name].ask("pass")
            seconds[name].append(reply["seconds"])
            predicted[name] = np.asarray(reply["labels"])
            print(f"round {round_ + 1}: {name} {sentences / reply['seconds']:.1f} sentences/s", flush=True)
        if loads is not None:
            loads.append(read_loadavg())
    return seconds, predicted


def _prepare(folder):
    """The split, the fine-tuned run and its Hugging Face export, each made once."""
    from bench.corpora.mr_split import write_mr_split

    os.makedirs(folder, exist_ok=True)  # a fresh checkout has no data/bench/cpu_peers yet
    texts, labels, train_idx, test_idx, train_csv, test_csv = write_mr_split(folder)
    minilm = os.path.join(folder, "minilm.keras")
    if not os.path.exists(minilm):
        kbert("convert", os.path.join(REPO, "data", "minilm"), "--format", "huggingface", "--output", minilm)
    run = os.path.join(folder, "mr_pooled")
    if not os.path.exists(os.path.join(run, "model.keras")):
        kbert(
            "finetune",
            "--task",
            "classification",
            "--init",
            minilm,
            "--train",
            train_csv,
            "--validation",
            test_csv,
            "--no-header",
            "--columns",
            "label,text",
            "--seq-len",
            "128",
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--learning-rate",
            "1e-4",
            "--output",
            run,
            "--quiet",
        )
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


def speed_row(child, per_round, latency, closing, **extra):
    """A runtime's row of the results: sentences/s per round [rounds] and their summary, `extra`,
    batch-1 latency, then what the child said when ready (load seconds, ...) and when done."""
    return {
        "sentences_per_second": [float(v) for v in per_round],
        "sentences_per_second_summary": _summary(per_round),
        **extra,
        "latency_batch1_ms": latency,
        **{k: v for k, v in child.ready.items() if k != "ready"},
        **closing,
    }


def checked_runtimes(args):
    """(the runtimes to run, those of them capped at CAP_ISA), checked against this CPU."""
    # CpuFeatures by its path, not the package: see cpu_features_class (the peers' peak memory).
    avx512 = cpu_features_class().of_this_machine().has("AVX-512")
    known = OURS + tuple(CAPPED) + PEERS
    runtimes = [
        r.strip()
        for r in (args.runtimes or ",".join(OURS + (tuple(CAPPED) if avx512 else ()) + PEERS)).split(",")
        if r.strip()
    ]
    unknown = sorted(set(runtimes) - set(known))
    if unknown or args.rounds < 1:
        raise SystemExit(
            f"--runtimes takes a subset of {','.join(known)} (unknown: {unknown}); --rounds >= 1."
        )
    capped = [name for name in runtimes if name in CAPPED]
    if capped and not avx512:
        raise SystemExit(
            f"--runtimes {','.join(capped)}: this CPU has no AVX-512, so capping oneDNN at {CAP_ISA} "
            "changes nothing; leave them out."
        )
    return runtimes, capped


def child_command(name, args, run, sentences, hf, calibration):
    """(command, environment or None) of the child that serves runtime `name`."""
    env = None
    if name in OURS or name in CAPPED:
        precision = CAPPED.get(name, name[len("ours_") :])
        command = [
            sys.executable,
            "-m",
            "bench.perf.cpu_peers",
            "--ours-child",
            precision,
            "--run",
            run,
            "--sentences",
            sentences,
        ]
        # Spelled here, not imported: this parent stays without the package (cpu_features_class).
        env = {**os.environ, "KBERT_CACHE_DIR": "off"}
        if name in CAPPED:
            env["ONEDNN_MAX_CPU_ISA"] = CAP_ISA
    else:
        command = [
            args.peers_python,
            "-m",
            "bench.reference.classify_peers",
            "--serve",
            "--model",
            hf,
            "--sentences",
            sentences,
            "--peer",
            name,
            "--threads",
            "2",
            "--calibration",
            calibration,
            "--latency-sentences",
            str(LATENCY_SENTENCES),
        ]
    return command, env


def runtime_ratios(rows, children):
    """Speed ratios: ours against the fastest peer of its kind, our precisions against our fp32,
    capped against native."""

    def ratio(ours, other):
        per_round = [
            a / b for a, b in zip(rows[ours]["sentences_per_second"], rows[other]["sentences_per_second"])
        ]
        return {
            "per_round": per_round,
            **_summary(per_round),
            "accuracy_points": 100
            * (rows[ours]["accuracy_800_held_out"] - rows[other]["accuracy_800_held_out"]),
        }

    ours_sides = OURS + tuple(CAPPED)
    fp32_peers = [p for p in children if p not in ours_sides and p not in INT8]
    int8_peers = [p for p in children if p in INT8 and p not in ours_sides]
    ratios = {}
    for ours, peers in (
        ("ours_fp32", fp32_peers),
        ("ours_fp32_litert", fp32_peers),
        ("ours_fp32_onednn_avx2", fp32_peers),
        ("ours_int8", int8_peers),
    ):
        if ours in children and peers:
            fastest = max(peers, key=lambda p: np.median(rows[p]["sentences_per_second"]))
            ratios[f"{ours}_over_{fastest}"] = ratio(ours, fastest)
    # Our precisions against our fp32 (what --precision auto's table holds), and capped against native.
    for ours, other in (
        ("ours_int8", "ours_fp32"),
        ("ours_bf16", "ours_fp32"),
        ("ours_fp32_litert", "ours_fp32"),
        ("ours_fp32_onednn_avx2", "ours_fp32"),
        ("ours_bf16_onednn_avx2", "ours_bf16"),
    ):
        if ours in children and other in children:
            ratios[f"{ours}_over_{other}"] = ratio(ours, other)
    return ratios


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--peers-python",
        default=os.path.join(REPO, ".venv-peers", "bin", "python"),
        help="Python of .venv-peers (make peers-venv).",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--runtimes",
        default=None,
        help="Comma-separated subset to run (default: all; the capped ones where the CPU has AVX-512).",
    )
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "cpu_peers.json"))
    # The child modes (this script runs itself as the children of ours).
    parser.add_argument(
        "--ours-child", choices=("fp32", "bf16", "int8", "fp32_litert"), help=argparse.SUPPRESS
    )
    parser.add_argument("--onednn-check", choices=("fp32", "bf16"), help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--sentences", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ours_child:
        return ours_child(args.run, args.ours_child, args.sentences)
    if args.onednn_check:
        return onednn_check_child(args.run, args.onednn_check, args.sentences)
    runtimes, capped = checked_runtimes(args)
    texts, labels, test_idx, run, hf, sentences, calibration = _prepare(FOLDER)
    machine = machine_info()
    # The cap checked before any timing: oneDNN's own account of its ISA and kernels, native and capped.
    dispatch = {}
    for precision in sorted({CAPPED[name] for name in capped}):
        dispatch[f"{precision}_native"] = onednn_dispatch(run, sentences, precision)
        dispatch[f"{precision}_capped"] = record = onednn_dispatch(run, sentences, precision, cap=CAP_ISA)
        # oneDNN prints its ISA when it starts, so a child that fails later still shows whether the cap held.
        record["cap_took_effect"] = cap_took_effect(record) if record["isa"] else None
        print(
            f"oneDNN {precision}: native {dispatch[f'{precision}_native']['isa']}, capped {record['isa']} "
            f"(exit {record['returncode']}): {record['implementations']}",
            flush=True,
        )
        if record["cap_took_effect"] is False:
            raise SystemExit(f"ONEDNN_MAX_CPU_ISA={CAP_ISA} did not take effect for {precision}: {record}")
    if args.wait_idle:
        wait_for_idle(args.wait_idle)

    children, failed = {}, {}
    for name in runtimes:
        command, env = child_command(name, args, run, sentences, hf, calibration)
        try:
            children[name] = _Child(name, command, FOLDER, env=env)
        except RuntimeError as error:  # a peer that will not run here is listed with its error
            failed[name] = str(error)
    loads = []
    seconds, predicted = interleaved_passes(children, args.rounds, len(texts), loads)
    latency = {name: child.ask("latency")["latency_batch1_ms"] for name, child in children.items()}
    closing = {name: child.close() for name, child in children.items()}

    # The run's label names ("-1", "1") to the ids every side predicts.
    with open(os.path.join(hf, "config.json"), encoding="utf-8") as f:
        label2id = json.load(f)["label2id"]
    truth = np.array([label2id[str(label)] for label in labels[test_idx]])
    rows = {
        name: speed_row(
            child,
            len(texts) / np.asarray(seconds[name]),
            latency[name],
            closing[name],
            accuracy_800_held_out=float(np.mean(predicted[name][test_idx] == truth)),
        )
        for name, child in children.items()
    }

    ratios = runtime_ratios(rows, children)
    results = {
        "sentences": len(texts),
        "held_out": len(test_idx),
        "rounds": args.rounds,
        "threads": 2,
        "batch_size": 32,
        "truncation": 128,
        "model": os.path.relpath(run, REPO),
        "runtimes": rows,
        "failed": failed,
        "ratios": ratios,
        "loadavg_after_each_round": loads,
        "isa": {
            "native": [name for name in children if name not in CAPPED]
            + [n for n in failed if n not in CAPPED],
            f"onednn_capped_at_{CAP_ISA.lower()}": capped,
            "uncapped": "ONEDNN_MAX_CPU_ISA reaches only TensorFlow's oneDNN (ours fp32 and bf16). Ours int8 "
            "runs on LiteRT's XNNPACK, which has no such cap; ONNX Runtime (MLAS), OpenVINO and "
            "PyTorch choose their kernels from the CPU's own features, and their children get no "
            "cap. Every runtime not in the capped list ran native to this CPU.",
            "onednn_dispatch": dispatch,
        },
    }
    machine = {**machine, "loadavg_at_end": read_loadavg()}
    report = {**report_header("cpu_peers", machine), **results}
    from keras_bert_impl.atomic_write import (
        write_json_atomically,
    )  # the children are done: the import is free now

    write_json_atomically(results_by_cpu(args.output, report), args.output, indent=2)
    print(
        f"wrote {args.output} (the run of "
        f"{cpu_features_class()(machine['cpu_model'], machine['cpu_simd']).describe()})",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
