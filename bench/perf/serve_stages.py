"""Where one request's milliseconds go in an export's LiteRT server (keras_bert_lite.serve), one
client at a time on one kept-alive connection: the client's send to the server's ASGI entry, the
entry to the model call, the call, the call's end to the answer handed to uvicorn, and that to the
client's last byte. The server runs in a child process with its ASGI app and the servable's `run`
wrapped to time-stamp each request (time.perf_counter is CLOCK_MONOTONIC, one clock for both
processes); `--toy` answers every request with the first one's outputs, so the stages are the
server's own cost without a forward pass (and without the caches a forward evicts).

    .venv/bin/python -m bench.perf.serve_stages --export data/bench/cpu_peers/mr_pooled_export \\
        --output bench/results/serve_stages_lite_fp32.json
"""

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from bench.common import REPO, machine_info, wait_for_idle, write_report

STAGES = ("client_to_app", "app_to_call", "call", "call_to_answer", "answer_to_client")


def child(export, quantization, toy, stamps_path):
    """The server: ModelServer over a LiteServable whose run and app are time-stamped."""
    from keras_bert_lite.serve.lite_servable import LiteServable
    from keras_bert_lite.serve.model_server import ModelServer

    servable = LiteServable(export, quantization)
    stamps = {"app_in": [], "call_in": [], "call_out": [], "app_out": []}
    run, first = servable.run, []

    def timed_run(signature, inputs):
        stamps["call_in"].append(time.perf_counter())
        if toy and first:
            outputs = {name: value.copy() for name, value in first[0].items()}
        else:
            outputs = run(signature, inputs)
            first.append(outputs)
        stamps["call_out"].append(time.perf_counter())
        return outputs

    servable.run = timed_run
    server = ModelServer([servable])
    app = server.app

    async def timed_app(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        stamps["app_in"].append(time.perf_counter())

        async def timed_send(message):
            if message["type"] == "http.response.start":
                stamps["app_out"].append(time.perf_counter())
            await send(message)

        await app(scope, receive, timed_send)

    server.app = timed_app
    server.serve(port=0, on_ready=lambda port: print(port, flush=True))
    with open(stamps_path, "w", encoding="utf-8") as f:
        json.dump(stamps, f)


def measure(args, toy):
    """{stage: p50 ms} and the total's p50 over --requests sentences, after 20 to warm up."""
    with open(args.sentences, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f][: args.requests]
    with open(os.path.join(args.export, "export.json"), encoding="utf-8") as f:
        name = json.load(f)["name"]
    stamps_path = os.path.join(REPO, "data", "bench", f"serve_stages_{os.getpid()}.json")
    command = [sys.executable, "-m", "bench.perf.serve_stages", "--child", args.export, args.quantization]
    server = subprocess.Popen(
        command + [str(int(toy)), stamps_path], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    port = int(server.stdout.readline())
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    sent, received = [], []
    for text in texts[:20] + texts:
        body = json.dumps({"instances": [text]})
        sent.append(time.perf_counter())
        conn.request("POST", f"/v1/models/{name}:predict", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        received.append(time.perf_counter())
        if response.status != 200:
            raise SystemExit(f"the server answered {response.status}")
    conn.close()
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=60)
    with open(stamps_path, encoding="utf-8") as f:
        stamps = json.load(f)
    os.remove(stamps_path)
    bounds = [sent, stamps["app_in"], stamps["call_in"], stamps["call_out"], stamps["app_out"], received]
    row = {}
    for index, stage in enumerate(STAGES):
        row[stage] = round(
            1000 * statistics.median(b - a for a, b in list(zip(bounds[index], bounds[index + 1]))[20:]), 3
        )
    row["total"] = round(1000 * statistics.median(b - a for a, b in list(zip(sent, received))[20:]), 3)
    row["around_the_call"] = round(row["total"] - row["call"], 3)
    return row


def main(argv=None):
    if argv is None and sys.argv[1:2] == ["--child"]:
        export, quantization, toy, stamps_path = sys.argv[2:6]
        return child(export, quantization, toy == "1", stamps_path)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--export", required=True, help="A classifier's kbert export folder (tflite).")
    parser.add_argument("--quantization", default="float32", choices=("float32", "dynamic_int8"))
    parser.add_argument(
        "--sentences", default=os.path.join(REPO, "data", "bench", "cpu_peers", "mr_sentences.txt")
    )
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join(REPO, "bench", "results", "serve_stages.json"))
    args = parser.parse_args(argv)
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    machine = machine_info()
    rounds = {"model": [], "toy": []}
    for _ in range(args.rounds):
        for kind in rounds:
            rounds[kind].append(measure(args, toy=kind == "toy"))
            print(kind, rounds[kind][-1], flush=True)
    results = {
        "export": os.path.relpath(args.export, REPO),
        "quantization": args.quantization,
        "requests_per_round": args.requests,
        "rounds": rounds,
        "median_of_rounds": {
            kind: {stage: statistics.median(r[stage] for r in rows) for stage in rows[0]}
            for kind, rows in rounds.items()
        },
    }
    write_report(args.output, "where one request's milliseconds go in the LiteRT server", results, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
