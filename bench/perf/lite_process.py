"""One request's process without TensorFlow: `kbert predict --model EXPORT` (keras_bert_lite on
LiteRT) against the run folder on TensorFlow and ONNX Runtime, on the cpu_peers classifier
(issue 54's start-up, memory and batch-1 items).

    .venv/bin/python -m bench.perf.lite_process --peers-python .venv-peers/bin/python \\
        --output bench/results/lite_process.json

The classifier is bench/perf/cpu_peers.py's (made there when missing); its `kbert export
--formats tflite --quantizations float32,dynamic_int8` folder is made here once
(data/bench/cpu_peers/mr_pooled_export). Two measurements, in --rounds interleaved rounds with
the order rotated from round to round:

- `whole_process`: `kbert predict --model M "one sentence"` as a user runs it, from the start
  of the process to its exit (seconds) and its peak resident memory (MiB, the child's own
  rusage), each once before the rounds so that every cache is warm: M the run folder (fp32 on
  TensorFlow, what every earlier entry measured; and with `--runtime litert` and `--precision
  int8`, which after that first process take the run folder's kept LiteRT route without
  TensorFlow: keras_bert_impl/commands/lite_route.py), the export folder at fp32 (its float32
  .tflite) and at --precision int8 (its dynamic_int8 one).
- `runtimes`: warm children speaking cpu_peers' protocol: ours fp32 on TensorFlow
  (`TextPredictor`), `LiteTextClassifier` on the export's float32 and dynamic_int8 files, and
  ONNX Runtime fp32 and int8 (bench/reference/classify_peers.py): sentences/s over the 4,000 MR
  sentences per round (batches of 32, each cut to its longest row, tokenization included),
  then batch-1 p50 over 200 sentences, load seconds and peak RSS.

- `serving`: `kbert serve` as a user starts it, each --rounds times: seconds from the start of
  the process to its "Serving" line (ready), then one client sending the first 200 of the
  sentences one per request (`{"instances": [TEXT]}`), on one kept-alive connection and then 50
  on a new connection each (p50 ms), then SIGTERM and the process's peak resident memory: the
  export folder's float32 and dynamic_int8 files on LiteRT (`--runtime litert`, `--precision
  int8`: keras_bert_lite.serve, no TensorFlow) and the run folder on TensorFlow (SavedModels
  exported at start-up, fp32). The one-client overhead is the HTTP p50 less the same
  precision's in-process batch-1 p50 of `runtimes`.

Ratios: each of ours over ONNX Runtime of its precision, per round; the servers' peak memory over
ONNX Runtime fp32's process.
"""

import argparse
import http.client
import json
import os
import signal
import sys
import tempfile
import time

import numpy as np

from bench.common import REPO, kbert, machine_info, read_loadavg, report_header, wait_for_idle
from bench.perf.cpu_peers import (
    FOLDER,
    LATENCY_SENTENCES,
    _Child,
    _latency,
    _peak_rss_mib,
    _prepare,
    _summary,
    child_command,
    interleaved_passes,
    results_by_cpu,
    speed_row,
)

EXPORT = os.path.join(FOLDER, "mr_pooled_export")
# whole-process runs: name -> (the run folder or the export, its flags)
WHOLE = {
    "ours_fp32_run_folder": ("run", []),
    "route_fp32_run_folder": ("run", ["--runtime", "litert"]),
    "route_int8_run_folder": ("run", ["--precision", "int8"]),
    "lite_fp32": ("export", ["--precision", "fp32"]),
    "lite_int8": ("export", ["--precision", "int8"]),
}
LITE = {"lite_fp32": "float32", "lite_int8": "dynamic_int8"}
RUNTIMES = ("ours_fp32", *LITE, "onnxruntime_fp32", "onnxruntime_int8")
RATIOS = {"ours_fp32": "onnxruntime_fp32", "lite_fp32": "onnxruntime_fp32", "lite_int8": "onnxruntime_int8"}


def lite_child(export, quantization, sentences_path):
    """LiteTextClassifier behind cpu_peers' child protocol (its module docstring)."""
    from keras_bert_lite import LiteTextClassifier

    with open(sentences_path, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    rss_before = _peak_rss_mib()
    start = time.perf_counter()
    classifier = LiteTextClassifier(export, quantization=quantization, sequence_length=128, batch_size=32)
    load_seconds = time.perf_counter() - start

    def labels(chunk):
        return classifier.predict(chunk)["logits"].argmax(-1)

    labels(texts[:256])
    ready = {"ready": True, "load_seconds": load_seconds, "rss_before_load_mib": rss_before}
    print(json.dumps(ready), flush=True)
    for command in sys.stdin:
        command = command.strip()
        if command == "pass":
            start = time.perf_counter()
            predicted = labels(texts)
            reply = {"seconds": time.perf_counter() - start, "labels": predicted.tolist()}
        elif command == "latency":
            reply = {"latency_batch1_ms": _latency(labels, texts[:LATENCY_SENTENCES])}
        elif command == "done":
            print(json.dumps({"peak_rss_mib": _peak_rss_mib()}), flush=True)
            return 0
        print(json.dumps(reply), flush=True)
    return 0


def whole_process(model, flags, sentence):
    """(seconds, peak RSS MiB, stdout) of one `kbert predict` process, start to exit; its peak
    memory is the child's own rusage (os.wait4)."""
    argv = [os.path.join(os.path.dirname(sys.executable), "kbert"), "predict", "--model", model, sentence]
    argv += flags
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        pid = os.posix_spawn(
            argv[0],
            argv,
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, write_end, 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)],
        )
        os.close(write_end)
        with os.fdopen(read_end, encoding="utf-8") as out:
            output = out.read()
        _, status, usage = os.wait4(pid, 0)
        seconds = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv)} failed: {err.read().decode('utf-8', 'replace')[-1500:]}")
    return seconds, usage.ru_maxrss / 1024, output.strip()


def whole_processes(run, rounds, sentence):
    """{name: {"seconds": [per round], "peak_rss_mib": [per round], "output"}}, rotated rounds."""
    names = list(WHOLE)
    rows = {name: {"seconds": [], "peak_rss_mib": []} for name in names}
    models = {"run": run, "export": EXPORT}
    for name in names:  # warm: LiteRT's kept files and the run folder's routes, the page cache
        seconds, rss, _ = whole_process(models[WHOLE[name][0]], WHOLE[name][1], sentence)
        rows[name]["first_process"] = {"seconds": seconds, "peak_rss_mib": rss}
    for round_ in range(rounds):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            seconds, rss, output = whole_process(models[WHOLE[name][0]], WHOLE[name][1], sentence)
            rows[name]["seconds"].append(seconds)
            rows[name]["peak_rss_mib"].append(rss)
            rows[name]["output"] = output
            print(f"round {round_ + 1}: {name} {seconds:.2f} s, {rss:.0f} MiB", flush=True)
    for row in rows.values():
        row["seconds_summary"], row["peak_rss_mib_summary"] = (
            _summary(row["seconds"]),
            _summary(row["peak_rss_mib"]),
        )
    return rows


# servers: name -> (the run folder or the export, its flags, the in-process row its overhead is over)
SERVE = {
    "serve_lite_fp32": ("export", ["--runtime", "litert"], "lite_fp32"),
    "serve_lite_int8": ("export", ["--precision", "int8"], "lite_int8"),
    "serve_ours_fp32_run_folder": ("run", [], "ours_fp32"),
}
SERVE_KEPT_ALIVE, SERVE_NEW_CONNECTIONS = LATENCY_SENTENCES, 50


def serve_once(model, flags, texts):
    """One `kbert serve` process: (ready seconds, kept-alive p50 ms, new-connection p50 ms, peak
    RSS MiB)."""
    argv = [os.path.join(os.path.dirname(sys.executable), "kbert"), "serve", "--model", model, "--port", "0"]
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        pid = os.posix_spawn(
            argv[0],
            argv + flags,
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, write_end, 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)],
        )
        os.close(write_end)
        with os.fdopen(read_end, encoding="utf-8") as out:
            line = out.readline()  # "Serving NAME (version N) at http://127.0.0.1:PORT/v1/models/NAME"
            ready = time.perf_counter() - start
            if not line.startswith("Serving "):
                os.kill(pid, signal.SIGKILL)
                err.seek(0)
                raise SystemExit(f"{' '.join(argv + flags)} did not start: {err.read().decode()[-1500:]}")
            url = line.split()[-1].removeprefix("http://")
            host, path = url.split("/", 1)
            port = int(host.split(":")[1])

            def ask(conn, text):
                body = json.dumps({"instances": [text]})
                started = time.perf_counter()
                conn.request(
                    "POST", f"/{path}:predict", body=body, headers={"Content-Type": "application/json"}
                )
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    raise SystemExit(f"{' '.join(argv + flags)} answered {response.status}")
                return 1000 * (time.perf_counter() - started)

            kept = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            for text in texts[:10]:
                ask(kept, text)
            kept_alive = [ask(kept, text) for text in texts[:SERVE_KEPT_ALIVE]]
            kept.close()
            new = []
            for text in texts[:SERVE_NEW_CONNECTIONS]:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                new.append(ask(conn, text))
                conn.close()
            os.kill(pid, signal.SIGTERM)
            out.read()
        _, status, usage = os.wait4(pid, 0)
    return ready, float(np.median(kept_alive)), float(np.median(new)), usage.ru_maxrss / 1024


def serve_rounds(run, rounds, texts):
    """{name: per round and summarised: ready seconds, p50s, peak RSS}, rotated rounds."""
    names = list(SERVE)
    fields = ("ready_seconds", "kept_alive_p50_ms", "new_connection_p50_ms", "peak_rss_mib")
    rows = {name: {field: [] for field in fields} for name in names}
    models = {"run": run, "export": EXPORT}
    for round_ in range(rounds):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            where, flags, _ = SERVE[name]
            for field, value in zip(fields, serve_once(models[where], flags, texts)):
                rows[name][field].append(value)
            print(f"round {round_ + 1}: {name} " + ", ".join(f"{f} {rows[name][f][-1]:.1f}" for f in fields))
    for row in rows.values():
        for field in fields:
            row[f"{field}_summary"] = _summary(row[field])
    return rows


def _serving_ratios(serving, rows):
    """Each server's one-client overhead over its in-process batch-1 p50, and peak RSS over ONNX
    Runtime fp32's process."""
    ratios = {}
    for name, (_, _, in_process) in SERVE.items():
        batch1 = rows[in_process]["latency_batch1_ms"]["p50"]
        ratios[name] = {
            "in_process_batch1_p50_ms": batch1,
            "kept_alive_overhead_ms": serving[name]["kept_alive_p50_ms_summary"]["median"] - batch1,
            "new_connection_overhead_ms": serving[name]["new_connection_p50_ms_summary"]["median"] - batch1,
            "peak_rss_over_onnxruntime_fp32": serving[name]["peak_rss_mib_summary"]["median"]
            / rows["onnxruntime_fp32"]["peak_rss_mib"],
        }
    return ratios


def _export(run):
    if not os.path.isfile(os.path.join(EXPORT, "export.json")):
        kbert(
            "export",
            "--model",
            run,
            "--formats",
            "tflite",
            "--quantizations",
            "float32,dynamic_int8",
            "--output",
            EXPORT,
        )


def _child(name, args, run, sentences, hf, calibration):
    if name in LITE:
        command = [
            sys.executable,
            "-m",
            "bench.perf.lite_process",
            "--lite-child",
            LITE[name],
            "--sentences",
            sentences,
        ]
        return _Child(name, command, FOLDER)
    command, env = child_command(name, args, run, sentences, hf, calibration)
    return _Child(name, command, FOLDER, env=env)


def _ratios(rows):
    ratios = {}
    for ours, peer in RATIOS.items():
        per_round = [
            a / b for a, b in zip(rows[ours]["sentences_per_second"], rows[peer]["sentences_per_second"])
        ]
        latency = rows[ours]["latency_batch1_ms"]["p50"] / rows[peer]["latency_batch1_ms"]["p50"]
        ratios[f"{ours}_over_{peer}"] = {
            "sentences_per_second": {"per_round": per_round, **_summary(per_round)},
            "batch1_p50": latency,
            "peak_rss": rows[ours]["peak_rss_mib"] / rows[peer]["peak_rss_mib"],
        }
    return ratios


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--peers-python", default=os.path.join(REPO, ".venv-peers", "bin", "python"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "lite_process.json"))
    parser.add_argument("--lite-child", choices=tuple(LITE.values()), help=argparse.SUPPRESS)
    parser.add_argument("--sentences", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.lite_child:
        return lite_child(EXPORT, args.lite_child, args.sentences)
    if args.rounds < 1:
        raise SystemExit(f"--rounds must be >= 1. Received: {args.rounds}")
    texts, labels, test_idx, run, hf, sentences, calibration = _prepare(FOLDER)
    _export(run)
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    whole = whole_processes(run, args.rounds, texts[test_idx[0]].replace("\n", " "))
    with open(sentences, encoding="utf-8") as f:
        serving = serve_rounds(run, args.rounds, [line.rstrip("\n") for line in f])
    children = {name: _child(name, args, run, sentences, hf, calibration) for name in RUNTIMES}
    loads = []
    seconds, predicted = interleaved_passes(children, args.rounds, len(texts), loads)
    latency = {name: child.ask("latency")["latency_batch1_ms"] for name, child in children.items()}
    closing = {name: child.close() for name, child in children.items()}
    rows = {
        name: speed_row(child, len(texts) / np.asarray(seconds[name]), latency[name], closing[name])
        for name, child in children.items()
    }
    # Every side's labels on the 4,000 sentences against ours on TensorFlow: the same model.
    agreement = {name: float(np.mean(predicted[name] == predicted["ours_fp32"])) for name in children}
    results = {
        "sentences": len(texts),
        "rounds": args.rounds,
        "threads": 2,
        "model": os.path.relpath(run, REPO),
        "export": os.path.relpath(EXPORT, REPO),
        "whole_process": whole,
        "runtimes": rows,
        "labels_agree_with_ours_fp32": agreement,
        "ratios": _ratios(rows),
        "serving": serving,
        "serving_ratios": _serving_ratios(serving, rows),
        "loadavg_after_each_round": loads,
    }
    report = {**report_header("lite_process", {**machine, "loadavg_at_end": read_loadavg()}), **results}
    from keras_bert_impl.atomic_write import write_json_atomically

    write_json_atomically(results_by_cpu(args.output, report), args.output, indent=2)
    print(json.dumps({k: whole[k]["seconds_summary"]["median"] for k in whole}), flush=True)
    print(json.dumps(_ratios(rows), indent=1), flush=True)
    print(json.dumps(_serving_ratios(serving, rows), indent=1), flush=True)
    print(f"wrote {args.output}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
