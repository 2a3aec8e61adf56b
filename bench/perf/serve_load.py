"""`kbert serve` under load: 32 concurrent clients on 127.0.0.1 against the fine-tuned MiniLM MR
classifier's raw-text SavedModel, versus the offline batch throughput of the same SavedModel.

The requests are 1-8 real MR sentences each (drawn with a fixed seed from the 4,000 MR sentences
of bench/experiments/distill_mr.py); each client holds one keep-alive connection and sends its
next request when the last is answered, until --seconds pass or --requests are sent. The
offline figure is the same SavedModel's signature called in this process on batches of
--max-batch-size, before and after the load (their mean). Every answered sentence's label is
compared with `kbert predict --json` on the run folder (at fp32).

With --precision int8 (or bf16, auto) the server is `kbert serve --model RUN --precision int8`
and the offline figure is the same in-process model (the wing's
`precision_export.export_in_precision`: for int8, the export's signatures around the int8
conversion); the results go to serve_load_int8.json.
With --runtime litert (fp32), `kbert serve --runtime litert`: the same signatures around the
float32 conversion on XNNPACK, offline likewise; serve_load_fp32_litert.json. Those servers
convert at start-up with --litert-cache off (the default: KBERT_CACHE_DIR=off for this process
and the server); with --litert-cache warm the in-process model converts into a folder of
--work's first and the server reads its file from there (inference/litert_cache.py), as a
server started again finds it; the output name ends in _cached.

With --lite EXPORT (a classifier's `kbert export --formats tflite` folder) the server is `kbert
serve --model EXPORT --runtime litert` (or `--precision int8`: the dynamic_int8 file), keras_bert_lite
without TensorFlow; the offline figure is its `LiteServable.run` in this process, and the labels
are checked against `kbert predict --model EXPORT --json` at the same precision; the results go to
serve_load_lite_PRECISION.json.

    .venv/bin/python -m bench.perf.serve_load --output bench/results/serve_load.json
    .venv/bin/python -m bench.perf.serve_load --precision int8
    .venv/bin/python -m bench.perf.serve_load --lite data/bench/cpu_peers/mr_pooled_export \
        --sentences data/bench/cpu_peers/mr_sentences.txt
"""

import argparse
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time

from bench.common import REPO, WORK, kbert, kbert_serve, machine_info, wait_for_idle, write_report
from keras_bert_impl.precisions import RUNTIME_NAMES

RUN = os.path.join(WORK, "distill_mr", "ours-mean-seed0-wu0.0-wd0.0")
SENTENCES = os.path.join(WORK, "distill_mr", "mr_sentences.txt")


def _offline(model, texts, batch_size):
    """Sentences per second of the SavedModel's signature on `texts` in batches."""
    import numpy as np

    started = time.perf_counter()
    for start in range(0, len(texts), batch_size):
        batch = [text.encode("utf-8") for text in texts[start : start + batch_size]]  # as the server's
        model.run("serving_default", {"text": np.array(batch, dtype=object)})
    return len(texts) / (time.perf_counter() - started)


def _lite_flags(args):
    return ["--runtime", "litert"] if args.precision == "fp32" else ["--precision", "int8"]


def _offline_model(args, export):
    """The model the server runs, in this process: the export's SavedModel at fp32; else what
    `kbert serve --precision` builds from the run folder (`export_in_precision`, in a temporary
    folder), at the length the run trained with, as the server takes it."""
    import atexit
    import shutil
    import tempfile

    if args.lite:
        from keras_bert_lite.serve.lite_servable import LiteServable

        return LiteServable(args.lite, "float32" if args.precision == "fp32" else "dynamic_int8")

    import keras

    from keras_bert_impl.inference import with_precision
    from keras_bert_impl.inference.forward_resolver import ForwardResolver
    from keras_bert_impl_export.precision_export import export_in_precision
    from keras_bert_impl_export.serve.servable_model import ServableModel

    if args.precision == "fp32" and args.runtime is None:
        return ServableModel("mr", 1, os.path.join(export, "serving", "mr", "1"))

    def log(line):
        print(f"serve_load: {line.strip()}", file=sys.stderr)

    # As the commands load a model: computing in float32, whatever policy it was trained in.
    model = with_precision(keras.saving.load_model(os.path.join(args.run, "model.keras")), "fp32")
    resolved = ForwardResolver(model, args.precision, args.runtime)
    if resolved.note:
        log(resolved.note)
    root = tempfile.mkdtemp(prefix="serve-load-")
    atexit.register(shutil.rmtree, root, True)
    folder = os.path.join(root, "export")
    functions = export_in_precision(resolved, folder, name="mr", seq_len=_run_seq_len(args.run), log=log)
    return ServableModel("mr", 1, os.path.join(folder, "serving", "mr", "1"), functions=functions.get("mr"))


def _run_seq_len(run):
    with open(os.path.join(run, "task.json"), encoding="utf-8") as f:
        return json.load(f)["seq_len"]


def _percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def kbert_predictions(args):
    """`kbert predict --json` on --sentences by text, run once into --work (the reference the
    served answers are checked against)."""
    model, flags = args.run, []
    predicted_path = os.path.join(args.work, "predicted.jsonl")
    if args.lite:
        model, flags = args.lite, _lite_flags(args)
        predicted_path = os.path.join(args.work, f"predicted_lite_{args.precision}.jsonl")
    if not os.path.isfile(predicted_path):
        with open(predicted_path + ".tmp", "w", encoding="utf-8") as out:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "keras_bert_impl.cli",
                    "predict",
                    "--model",
                    model,
                    "--file",
                    args.sentences,
                    "--json",
                    *flags,
                ],
                check=True,
                stdout=out,
                cwd=REPO,
            )
        os.replace(predicted_path + ".tmp", predicted_path)
    with open(predicted_path, encoding="utf-8") as f:
        predicted = {row["text"]: row for row in map(json.loads, f) if row.get("text")}
    return predicted


def differences(ok, predicted):
    """(labels that differ, largest probability difference) of the served answers against
    `kbert predict`'s."""
    mismatched, max_difference = 0, 0.0
    for _, _, body, payload in ok:
        for text, answer in zip(body, payload["predictions"]):
            expected = predicted[text]
            mismatched += answer["top_label"] != expected["label"]
            max_difference = max(max_difference, abs(answer["top_score"] - expected["probability"]))
    return mismatched, max_difference


def _start_server(args, export, model):
    """`kbert serve` of what --lite, --precision and --runtime name: (process, port, what it
    serves, its flags, the model's name, seconds to its "Serving" line)."""
    # Another precision is made from the Keras model, so its server starts from the run folder.
    served = export if args.precision == "fp32" and args.runtime is None else args.run
    flags = [
        "--name",
        "mr",
        "--precision",
        args.precision,
        *(["--runtime", args.runtime] if args.runtime else []),
    ]
    name = "mr"
    if args.lite:
        served, flags, name = args.lite, _lite_flags(args), model.name
    server, port, start_up = kbert_serve(
        served,
        [
            *flags,
            "--max-batch-size",
            str(args.max_batch_size),
            "--batch-timeout-ms",
            str(args.batch_timeout_ms),
        ],
        stderr=subprocess.PIPE,
    )
    return server, port, served, flags, name, start_up


def _auto_picked(precision, err):
    """{"auto_picked": the precision the server's one line says auto picked on this CPU} under
    --precision auto, else {}."""
    if precision != "auto":
        return {}
    said = re.search(r"--precision auto: (\w+)", err)
    return {"auto_picked": said and said.group(1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--run", default=RUN, help="A kbert finetune run folder of a classifier.")
    parser.add_argument(
        "--lite", help="A classifier's kbert export folder (tflite), served on LiteRT without TensorFlow."
    )
    parser.add_argument("--sentences", default=SENTENCES, help="One sentence per line.")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--batch-timeout-ms", type=float, default=2.0)
    parser.add_argument("--offline-sentences", type=int, default=1000)
    parser.add_argument(
        "--wait-idle", type=float, default=0, help="Wait up to this many seconds for an idle machine."
    )
    parser.add_argument(
        "--precision",
        default="fp32",
        choices=("fp32", "bf16", "int8", "auto"),
        help="kbert serve's --precision. Default fp32.",
    )
    parser.add_argument(
        "--runtime",
        default=None,
        choices=RUNTIME_NAMES,
        help="kbert serve's --runtime (litert: fp32 on XNNPACK). Default: the precision's own.",
    )
    parser.add_argument(
        "--litert-cache",
        default="off",
        choices=("off", "warm"),
        help="int8 and --runtime litert: off (the server converts at start-up) or warm (it reads "
        "the file this process converted). Default off.",
    )
    parser.add_argument(
        "--work",
        default=os.path.join(WORK, "serve_load"),
        help="Folder for the fp32 export and kbert predict's labels of --run (made once, then reused).",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="Default bench/results/serve_load.json, serve_load_PRECISION.json for another precision.",
    )
    args = parser.parse_args(argv)
    default = args.precision == "fp32" and args.runtime is None
    suffix = "" if default else f"_{args.precision}" + (f"_{args.runtime}" if args.runtime else "")
    suffix += "_cached" if args.litert_cache == "warm" else ""
    if args.lite:
        if args.precision not in ("fp32", "int8") or args.runtime:
            raise SystemExit("--lite serves fp32 (its float32 file) or --precision int8 (dynamic_int8).")
        suffix, args.run = f"_lite_{args.precision}", args.lite
    args.output = args.output or os.path.join("bench", "results", f"serve_load{suffix}.json")
    for path, what in ((args.run, "--run"), (args.sentences, "--sentences")):
        if not os.path.exists(path):
            raise SystemExit(
                f"{what} {path}: missing. `make experiment-distill-mr` writes both (its teacher run and "
                "the MR sentences); or pass any classifier run and a sentence file."
            )
    with open(args.sentences, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f if line.strip()]

    os.makedirs(args.work, exist_ok=True)
    from keras_bert_impl.inference.litert_cache import ENVIRONMENT_VARIABLE, OFF

    # Set before anything converts: this process's offline model and the server (which inherits it).
    os.environ[ENVIRONMENT_VARIABLE] = (
        OFF if args.litert_cache == "off" else os.path.join(args.work, "litert_cache")
    )
    export = os.path.join(args.work, "export")
    if args.precision == "fp32" and not args.lite and not os.path.isdir(export):
        kbert("export", "--model", args.run, "--output", export, "--formats", "saved_model", "--name", "mr")
    predicted = kbert_predictions(args)

    rng = random.Random(0)
    requests = [rng.sample(texts, rng.randint(1, 8)) for _ in range(args.requests)]
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)

    model = _offline_model(args, export)
    offline_texts = texts[: args.offline_sentences]
    _offline(model, offline_texts[:64], args.max_batch_size)  # warm-up
    offline_before = _offline(model, offline_texts, args.max_batch_size)

    server, port, served, flags, name, start_up = _start_server(args, export, model)
    # One request to warm the server (its first call traces nothing, but oneDNN picks its kernels).
    warm = http.client.HTTPConnection("127.0.0.1", port)
    warm.request("POST", f"/v1/models/{name}:predict", json.dumps({"instances": texts[:32]}))
    warm.getresponse().read()

    lock = threading.Lock()
    next_request = [0]
    results = []  # (status, seconds, sentences, answers)
    deadline = time.perf_counter() + args.seconds

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.perf_counter() < deadline:
            with lock:
                if next_request[0] >= len(requests):
                    return
                body = requests[next_request[0]]
                next_request[0] += 1
            sent = time.perf_counter()
            conn.request(
                "POST",
                f"/v1/models/{name}:predict",
                json.dumps({"instances": body}),
                {"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            payload = json.loads(response.read())
            results.append((response.status, time.perf_counter() - sent, body, payload))

    load_started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    load_seconds = time.perf_counter() - load_started

    metrics = http.client.HTTPConnection("127.0.0.1", port)
    metrics.request("GET", "/monitoring/prometheus/metrics")
    exposition = metrics.getresponse().read().decode()
    server.terminate()
    _, err = server.communicate(timeout=120)
    offline_after = _offline(model, offline_texts, args.max_batch_size)

    ok = [r for r in results if r[0] == 200]
    sentences = sum(len(r[2]) for r in ok)
    mismatched, max_difference = differences(ok, predicted)
    batches = [line for line in exposition.splitlines() if line.startswith("kbert_serve_batch_rows_")]
    count = float(next(b for b in batches if b.startswith("kbert_serve_batch_rows_count")).split()[-1])
    rows = float(next(b for b in batches if b.startswith("kbert_serve_batch_rows_sum")).split()[-1])
    offline = (offline_before + offline_after) / 2
    throughput = sentences / load_seconds
    latencies = [r[1] for r in ok]
    results_json = {
        "model": {
            "run": os.path.relpath(args.run, REPO),
            "export": "kbert export --formats saved_model"
            if served == export
            else f"kbert serve --model EXPORT {' '.join(flags)} (keras_bert_lite, no TensorFlow)"
            if args.lite
            else f"kbert serve --model RUN --precision {args.precision}"
            f"{' --runtime ' + args.runtime if args.runtime else ''} (exported on start-up)",
            "precision": args.precision,
            "runtime": args.runtime,
            "litert_cache": args.litert_cache,
            "seq_len_padded_to": None if args.lite else _run_seq_len(args.run),
        },
        "settings": {
            "clients": args.clients,
            "seconds": args.seconds,
            "requests_planned": args.requests,
            "sentences_per_request": "1-8, uniform",
            "max_batch_size": args.max_batch_size,
            "batch_timeout_ms": args.batch_timeout_ms,
        },
        "server_start_up_seconds": round(start_up, 2),
        "requests": len(results),
        "status_counts": {
            str(s): sum(1 for r in results if r[0] == s) for s in sorted({r[0] for r in results})
        },
        "server_5xx": sum(1 for r in results if r[0] >= 500),
        "load_seconds": round(load_seconds, 2),
        "throughput_sentences_per_s": round(throughput, 1),
        "throughput_requests_per_s": round(len(ok) / load_seconds, 1),
        "latency_ms": {
            "p50": round(1000 * _percentile(latencies, 50), 1),
            "p90": round(1000 * _percentile(latencies, 90), 1),
            "p99": round(1000 * _percentile(latencies, 99), 1),
        },
        "mean_rows_per_model_call": round(rows / count, 2),
        "offline_sentences_per_s": {
            "before": round(offline_before, 1),
            "after": round(offline_after, 1),
            "sentences": len(offline_texts),
            "batch_size": args.max_batch_size,
        },
        "served_over_offline": round(throughput / offline, 3),
        "labels_differing_from_kbert_predict": mismatched,
        "max_probability_difference_from_kbert_predict": max_difference,
        "server_stderr_tail": err.strip().splitlines()[-1:],
        **_auto_picked(args.precision, err),
    }
    print(json.dumps(results_json, indent=2))
    write_report(args.output, "serve_load", results_json, machine, command=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
