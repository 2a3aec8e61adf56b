"""What `kbert serve` adds to one request, one client at a time: HTTP p50 against the same
signature called in this process.

The default model is a toy SavedModel (y = x * 0.5 + 2, one float in and out), so the figure
is the server's own cost (HTTP/1.1, JSON, routing, the dynamic batcher), not a forward pass;
`--export FOLDER --name NAME --body JSON` measures a real export instead (e.g. `make demo`'s,
with a body of one sentence). Three clients, interleaved in `--rounds` rounds of `--requests`
each:
    keep_alive       one http.client connection kept open (wrk, requests.Session, load balancers)
    new_connection   a connection per request (curl)
    one_write        a raw socket sending each request in one write, on a kept-alive connection
The in-process figure is `ServableModel.run` of the same signature, the call the server makes.

With `--lite EXPORT` the server is `kbert serve --model EXPORT --runtime litert` (or `--precision
int8` with `--quantization dynamic_int8`): keras_bert_lite.serve, no TensorFlow. Each request is
one sentence, the first --requests of --sentences in turn (their own widths, as a user's), and the
in-process figures, measured in this process in the same rounds, are the server's call
(`LiteServable.run`) and `LiteTextClassifier.predict` of one sentence (cpu_peers' and lite_process'
batch-1 p50): the one-client overhead of issue 54 is the HTTP p50 less the latter.

    .venv/bin/python -m bench.perf.serve_overhead --output bench/results/serve_overhead.json
    .venv/bin/python -m bench.perf.serve_overhead --lite data/bench/cpu_peers/mr_pooled_export \
        --output bench/results/serve_overhead_lite_fp32.json
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import sys
import tempfile
import time

from bench.common import REPO, kbert_serve, machine_info, wait_for_idle, write_report

MODES = ("keep_alive", "new_connection", "one_write")


def _toy_export(folder):
    import keras_bert_impl  # noqa: F401  (quiets TensorFlow's CUDA and oneDNN logs before it loads)
    import tensorflow as tf

    class Toy(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
        def half_plus_two(self, x):
            return {"y": x * 0.5 + 2.0}

    toy = Toy()
    tf.saved_model.save(
        toy, os.path.join(folder, "serving", "toy", "1"), signatures={"serving_default": toy.half_plus_two}
    )
    return folder


def _in_process(export, name, body, requests):
    """p50 ms of the signature called as the server calls it, on the body's instances."""
    import numpy as np

    from keras_bert_impl_export.serve.servable_model import ServableModel

    model = ServableModel(name, 1, os.path.join(export, "serving", name, "1"))
    (input_name,) = [n for n in model.signatures["serving_default"]["inputs"]]
    instances = json.loads(body)["instances"]
    dtype = object if isinstance(instances[0], str) else np.float32
    inputs = {input_name: np.array(instances, dtype=dtype)}
    model.run("serving_default", inputs)
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        model.run("serving_default", inputs)
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def _lite_in_process(export, quantization, texts):
    """A function of no argument timing one pass of the server's call and of
    LiteTextClassifier.predict over `texts`, one sentence a call: (ms list, ms list)."""
    import numpy as np

    from keras_bert_lite.serve.lite_servable import LiteServable

    servable = LiteServable(export, quantization)
    classifier = servable.classifier

    def timed(call):
        call(texts[0])
        times = []
        for text in texts:
            started = time.perf_counter()
            call(text)
            times.append((time.perf_counter() - started) * 1e3)
        return times

    def run(text):
        return servable.run("serving_default", {"text": np.array([text.encode()], dtype=object)})

    return lambda: (timed(run), timed(lambda text: classifier.predict([text])))


def _http_times(port, path, bodies, mode, requests):
    """Milliseconds per request (send to last byte of the answer) over `mode`'s connections;
    `bodies` in turn."""
    times = []
    conn = sock = None
    for index in range(requests):
        body = bodies[index % len(bodies)]
        data = body.encode()
        raw = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode() + data
        if mode == "keep_alive" and conn is None or mode == "new_connection":
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.connect()
        if mode == "one_write" and sock is None:
            sock = socket.create_connection(("127.0.0.1", port), timeout=60)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        if mode == "one_write":
            _one_write(sock, raw)
        else:
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"the server answered {response.status} to {body[:80]}")
        times.append((time.perf_counter() - started) * 1e3)
        if mode == "new_connection":
            conn.close()
    for c in (conn, sock):
        if c is not None:
            c.close()
    return times


def _one_write(sock, raw):
    sock.sendall(raw)
    buffer = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        buffer += chunk
        head, sep, rest = buffer.partition(b"\r\n\r\n")
        if sep:
            length = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
            if length and len(rest) >= int(length[0].split(b":")[1]):
                return


def _summary(values, in_process=None):
    values = sorted(values)
    p50 = statistics.median(values)
    row = {
        "p50_ms": round(p50, 3),
        "p90_ms": round(values[int(0.9 * (len(values) - 1))], 3),
        "min_ms": round(values[0], 3),
    }
    if in_process is not None:
        row["overhead_p50_ms"] = round(p50 - in_process, 3)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--export", help="A kbert export folder to serve (default: a toy SavedModel).")
    parser.add_argument("--name", default="toy", help="The model's name under the export's serving/.")
    parser.add_argument("--body", default=json.dumps({"instances": [1.0]}), help="The :predict request body.")
    parser.add_argument(
        "--lite", help="A classifier's kbert export folder, served on LiteRT without TensorFlow."
    )
    parser.add_argument("--quantization", default="float32", choices=("float32", "dynamic_int8"))
    parser.add_argument(
        "--sentences",
        default=os.path.join(REPO, "data", "bench", "cpu_peers", "mr_sentences.txt"),
        help="--lite's requests: one sentence per line.",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200, help="Requests per client per round.")
    parser.add_argument(
        "--wait-idle", type=float, default=0, help="Wait up to this many seconds for an idle machine."
    )
    parser.add_argument("--output", default=os.path.join(REPO, "bench", "results", "serve_overhead.json"))
    args = parser.parse_args(argv)
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    machine = machine_info()
    if args.lite:
        results = _lite(args)
    else:
        results = _toy_or_export(args)
    write_report(args.output, "kbert serve's own cost per request at one client", results, machine)


def _lite(args):
    with open(args.sentences, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f][: args.requests]
    bodies = [json.dumps({"instances": [text]}) for text in texts]
    flags = ["--runtime", "litert"] if args.quantization == "float32" else ["--precision", "int8"]
    with open(os.path.join(args.lite, "export.json"), encoding="utf-8") as f:
        name = json.load(f)["name"]
    path = f"/v1/models/{name}:predict"
    server, port, _ = kbert_serve(args.lite, flags)
    in_process_pass = _lite_in_process(args.lite, args.quantization, texts)
    times = {mode: [] for mode in ("servable_run", "classifier_predict", *MODES)}
    try:
        _http_times(port, path, bodies, "keep_alive", 20)  # warm-up
        for _ in range(args.rounds):
            run, predict = in_process_pass()
            times["servable_run"] += run
            times["classifier_predict"] += predict
            for mode in MODES:
                times[mode] += _http_times(port, path, bodies, mode, len(bodies))
    finally:
        server.terminate()
        server.wait(timeout=60)
    in_process = statistics.median(times["classifier_predict"])
    results = {
        "model": args.lite,
        "server": "kbert serve --model EXPORT " + " ".join(flags),
        "quantization": args.quantization,
        "sentences": len(texts),
        "rounds": args.rounds,
        "in_process_p50_ms": round(in_process, 3),
        "servable_run": _summary(times["servable_run"]),
        "classifier_predict": _summary(times["classifier_predict"]),
    }
    return _with_modes(results, times, in_process)


def _with_modes(results, times, in_process):
    """`results` with each HTTP mode's summary and its p50 over `in_process`, printed too."""
    for mode in MODES:
        results[mode] = _summary(times[mode], in_process)
        print(
            f"{mode:>15}: p50 {results[mode]['p50_ms']:.2f} ms, over in-process "
            f"{results[mode]['overhead_p50_ms']:.2f} ms",
            flush=True,
        )
    return results


def _toy_or_export(args):
    with tempfile.TemporaryDirectory() as tmp:
        export = args.export or _toy_export(tmp)
        server, port, _ = kbert_serve(export, [])
        try:
            path = f"/v1/models/{args.name}:predict"
            _http_times(port, path, [args.body], "keep_alive", 20)  # warm-up
            times = {mode: [] for mode in MODES}
            for _ in range(args.rounds):
                for mode in MODES:
                    times[mode] += _http_times(port, path, [args.body], mode, args.requests)
        finally:
            server.terminate()
            server.wait(timeout=60)
        in_process = _in_process(export, args.name, args.body, args.requests)
    results = {
        "model": args.export or "toy SavedModel (y = x * 0.5 + 2)",
        "body": args.body,
        "rounds": args.rounds,
        "requests_per_round": args.requests,
        "in_process_p50_ms": round(in_process, 3),
    }
    return _with_modes(results, times, in_process)


if __name__ == "__main__":
    sys.exit(main())
