"""Throughput of `kbert serve` with N LoRA adapters over one backbone, against one merged model's
server, under the same load.

The runs are serve_adapters_rss.py's (N rank-8 query+value adapters of one random base of the
chosen shape, MiniLM's vocabulary). Two servers run side by side for the whole bench: `kbert serve
--model RUN_1` (one LoRA run, merged and exported at start-up: what one adapter costs without
sharing) and `kbert serve --model RUN_1 ... --model RUN_N`. Each load window sends the same
requests (1-8 MR sentences each, drawn with a fixed seed; --clients threads, one keep-alive
connection each, the next request when the last is answered) for --seconds to one arm:

- merged: the one-run server, every request to its model;
- adapters_spread: the adapters server, request i to adapter i mod N, so concurrent requests to
  different adapters meet in mixed batches (one backbone call per batch, the design);
- adapters_one: the adapters server, every request to adapter 1 (no mixing: what the LoRA
  forward costs against the merged one, apart from mixing).

The arms take turns, --rounds times (so a change of the machine's load falls on all of them),
and the figures are per window plus the median window. Latencies are per request, client side.
The servers' batch sizes (kbert_serve_batch_rows) are read from their metrics.

    .venv/bin/python -m bench.perf.serve_adapters_load --output bench/results/serve_adapters_load.json
"""

import argparse
import http.client
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time

from bench.common import MR, REPO, machine_info, wait_for_idle, write_report
from bench.perf.serve_adapters_rss import SHAPES, _make_runs, start_serve

ARMS = ("merged", "adapters_spread", "adapters_one")


def _post(conn, name, body):
    conn.request(
        "POST",
        f"/v1/models/{name}:predict",
        json.dumps({"instances": body}),
        {"Content-Type": "application/json"},
    )
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def _batch_rows(port):
    """(model calls, rows) so far, from the server's kbert_serve_batch_rows histogram."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/monitoring/prometheus/metrics")
    lines = conn.getresponse().read().decode().splitlines()
    conn.close()

    def value(prefix):
        return sum(float(line.split()[-1]) for line in lines if line.startswith(prefix))

    return value("kbert_serve_batch_rows_count"), value("kbert_serve_batch_rows_sum")


def _window(port, names, requests, args):
    """One load window: the clients send `requests` in turn, request i to names[i % len(names)],
    for --seconds; returns its figures."""
    lock = threading.Lock()
    next_request = [0]
    results = []  # (status, seconds, sentences)
    calls_before, rows_before = _batch_rows(port)
    deadline = time.perf_counter() + args.seconds

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while time.perf_counter() < deadline:
            with lock:
                index = next_request[0] % len(requests)
                next_request[0] += 1
            body = requests[index]
            sent = time.perf_counter()
            status, payload = _post(conn, names[index % len(names)], body)
            answered = len(payload.get("predictions", ())) if status == 200 else 0
            results.append((status, time.perf_counter() - sent, len(body), answered))
        conn.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    calls_after, rows_after = _batch_rows(port)
    ok = [r for r in results if r[0] == 200]
    if len(ok) != len(results) or any(r[2] != r[3] for r in ok):
        raise RuntimeError(f"failed or short answers: {sorted({r[0] for r in results})}")
    latencies = sorted(r[1] for r in ok)
    return {
        "seconds": round(seconds, 2),
        "requests": len(ok),
        "sentences": sum(r[2] for r in ok),
        "sentences_per_s": round(sum(r[2] for r in ok) / seconds, 1),
        "latency_ms": {
            "p50": round(1000 * _percentile(latencies, 50), 1),
            "p99": round(1000 * _percentile(latencies, 99), 1),
        },
        "mean_rows_per_model_call": round((rows_after - rows_before) / max(1, calls_after - calls_before), 2),
    }


def _percentile(ordered, q):
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def _summary(windows):
    return {
        "sentences_per_s_median": round(statistics.median(w["sentences_per_s"] for w in windows), 1),
        "p50_ms_median": round(statistics.median(w["latency_ms"]["p50"] for w in windows), 1),
        "p99_ms_median": round(statistics.median(w["latency_ms"]["p99"] for w in windows), 1),
        "mean_rows_per_model_call_median": round(
            statistics.median(w["mean_rows_per_model_call"] for w in windows), 2
        ),
    }


def _rounds(folders, root, warm_up, requests, args):
    """({arm: [window]}, {server: its last stderr line}): both servers started, warmed up, and
    the arms' windows in turns, --rounds times."""
    servers, logs, windows = {}, {}, {arm: [] for arm in ARMS}
    try:
        for key, served in (("merged", folders[:1]), ("adapters", folders)):
            logs[key] = open(os.path.join(root, f"{key}.log"), "w+", encoding="utf-8")
            servers[key] = start_serve(
                served,
                logs[key],
                "--seq-len",
                str(args.seq_len),
                "--max-batch-size",
                str(args.max_batch_size),
                "--batch-timeout-ms",
                str(args.batch_timeout_ms),
            )
        targets = {
            "merged": servers["merged"][1:],
            "adapters_spread": servers["adapters"][1:],
            "adapters_one": (servers["adapters"][1], servers["adapters"][2][1:2]),
        }
        for port, names in targets.values():  # warm-up: oneDNN's kernels, the first traces
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            for name in names:
                _post(conn, name, warm_up)
            conn.close()
        for round_index in range(args.rounds):
            for arm in ARMS if round_index % 2 == 0 else ARMS[::-1]:
                windows[arm].append(_window(*targets[arm], requests, args))
                print(
                    f"round {round_index} {arm}: {json.dumps(windows[arm][-1])}", file=sys.stderr, flush=True
                )
    finally:
        for process, _, _ in servers.values():
            process.terminate()
            process.wait(timeout=120)
    stopped = {}
    for key, log in logs.items():
        log.seek(0)
        stopped[key] = log.read().strip().splitlines()[-1:]
        log.close()
    return windows, stopped


def _parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--adapters", type=int, default=4)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="minilm")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30, help="Per load window. Default 30.")
    parser.add_argument("--rounds", type=int, default=3, help="Turns of every arm. Default 3.")
    parser.add_argument("--seq-len", type=int, default=64, help="Tokens per sentence (both servers).")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--batch-timeout-ms", type=float, default=2.0)
    parser.add_argument(
        "--wait-idle", type=float, default=0, help="Wait up to this many seconds for an idle machine."
    )
    parser.add_argument(
        "--output", default=os.path.join(REPO, "bench", "results", "serve_adapters_load.json")
    )
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.adapters < 2 or args.rounds < 1:
        raise SystemExit(
            f"--adapters must be at least 2 and --rounds at least 1. Received: {args.adapters}, {args.rounds}"
        )
    from bench.corpora.mr_split import load_mr

    texts, _ = load_mr(MR)
    rng = random.Random(0)
    requests = [rng.sample(texts, rng.randint(1, 8)) for _ in range(20_000)]
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    with tempfile.TemporaryDirectory(prefix="serve-adapters-load-") as root:
        folders = _make_runs(root, args.adapters, args.shape)
        windows, stopped = _rounds(folders, root, texts[:32], requests, args)
    summary = {arm: _summary(windows[arm]) for arm in ARMS}
    merged = summary["merged"]["sentences_per_s_median"]
    results = {
        "shape": args.shape,
        "layers_hidden_intermediate_heads": SHAPES[args.shape],
        "adapters": args.adapters,
        "settings": {
            "clients": args.clients,
            "seconds_per_window": args.seconds,
            "rounds": args.rounds,
            "order": "merged, adapters_spread, adapters_one; reversed in odd rounds",
            "sentences_per_request": "1-8 MR sentences, uniform, fixed seed",
            "seq_len": args.seq_len,
            "max_batch_size": args.max_batch_size,
            "batch_timeout_ms": args.batch_timeout_ms,
        },
        "median": summary,
        "adapters_spread_over_merged": round(
            summary["adapters_spread"]["sentences_per_s_median"] / merged, 3
        ),
        "adapters_one_over_merged": round(summary["adapters_one"]["sentences_per_s_median"] / merged, 3),
        "per_round_over_merged": {
            arm: [
                round(w["sentences_per_s"] / m["sentences_per_s"], 3)
                for w, m in zip(windows[arm], windows["merged"])
            ]
            for arm in ARMS[1:]
        },
        "windows": windows,
        "servers_last_stderr_line": stopped,
    }
    print(json.dumps(results, indent=2))
    write_report(args.output, "serve_adapters_load", results, machine)


if __name__ == "__main__":
    main()
