"""Peak memory of `kbert serve` with N LoRA adapters over one backbone, against one merged
model's server.

Builds N LoRA run folders from one random base of the chosen shape (MiniLM's vocabulary; rank 8
on query and value; adapters and heads drawn at random, as if trained), then starts, in turn,
`kbert serve --model RUN_1` (one LoRA run: merged and exported at start-up, what serving one
adapter costs without sharing) and `kbert serve --model RUN_1 ... --model RUN_N`; each answers
one request per model, then its peak resident set (VmHWM of /proc/PID/status) is read and it is
stopped. N separate servers would hold N times the first figure.

    .venv/bin/python -m bench.perf.serve_adapters_rss --output bench/results/serve_adapters_rss.json
"""

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from bench.common import REPO, machine_info, write_report

SHAPES = {  # name: (layers, hidden, intermediate, heads)
    "minilm": (6, 384, 1536, 12),
    "bert_base": (12, 768, 3072, 12),
}


def _make_runs(root, count, shape):
    import keras
    import numpy as np

    import keras_bert_impl as kb
    from keras_bert_impl.tokenization import read_vocabulary

    vocabulary = read_vocabulary(os.path.join(REPO, "data", "minilm", "vocab.txt"))
    layers, hidden, intermediate, heads = SHAPES[shape]
    folders = []
    for index in range(count):
        keras.utils.set_random_seed(0)  # one base
        backbone = kb.BertBackbone(
            vocabulary_size=len(vocabulary),
            num_layers=layers,
            hidden_dim=hidden,
            intermediate_dim=intermediate,
            num_heads=heads,
            max_sequence_length=128,
        )
        backbone.set_vocabulary(vocabulary, lowercase=True)
        backbone.enable_lora(8)
        classifier = kb.BertClassifier(backbone, num_classes=2)
        rng = np.random.default_rng(index + 1)
        for variable in classifier.variables:
            if "lora_kernel" in variable.path or "logits" in variable.path:
                variable.assign(rng.normal(0, 0.05, variable.shape).astype("float32"))
        folder = os.path.join(root, f"adapter_{index}")
        os.makedirs(folder)
        classifier.save(os.path.join(folder, "model.keras"))
        folders.append(folder)
        keras.utils.clear_session()
    return folders


def start_serve(folders, log, *flags):
    """(process, port, [model names]) of `kbert serve --model FOLDER... FLAGS` once it is listening
    (the text models' names; each also serves NAME_ids); its stderr goes to the file `log`."""
    models = [f for folder in folders for f in ("--model", folder)]
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_bert_impl.cli", "serve", *models, "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=log,  # a file: a pipe nobody reads would stop the server once full
        text=True,
        cwd=REPO,
    )
    names = []
    for _ in range(2 * len(folders)):  # NAME and NAME_ids of each
        line = process.stdout.readline()
        if not line.startswith("Serving "):
            process.kill()
            process.wait()
            log.seek(0)
            raise RuntimeError(f"kbert serve did not start: {line!r} {log.read()[-2000:]}")
        if not line.split()[1].endswith("_ids"):
            names.append(line.split()[1])
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
    return process, port, names


def _peak_rss(folders):
    """(peak RSS in MiB, seconds to ready) of `kbert serve` over `folders`, after one request each."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as log:
        process, port, names = start_serve(folders, log, "--seq-len", "32")
        ready = time.monotonic() - started
        for name in names:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            conn.request(
                "POST", f"/v1/models/{name}:predict", json.dumps({"instances": ["a gripping, funny film"]})
            )
            response = conn.getresponse()
            assert response.status == 200, response.read()
            response.read()
            conn.close()
        with open(f"/proc/{process.pid}/status", encoding="utf-8") as f:
            peak_kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=120)
    return peak_kib / 1024, ready


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapters", type=int, default=4)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="minilm")
    parser.add_argument("--output", default=os.path.join(REPO, "bench", "results", "serve_adapters_rss.json"))
    args = parser.parse_args(argv)
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="serve-adapters-") as root:
        folders = _make_runs(root, args.adapters, args.shape)
        one, one_ready = _peak_rss(folders[:1])
        shared, shared_ready = _peak_rss(folders)
    results = {
        "shape": args.shape,
        "layers_hidden_intermediate_heads": SHAPES[args.shape],
        "adapters": args.adapters,
        "one_merged_server_peak_rss_mib": round(one, 1),
        "adapters_server_peak_rss_mib": round(shared, 1),
        "ratio": round(shared / one, 3),
        "separate_servers_peak_rss_mib": round(args.adapters * one, 1),
        "seconds_to_ready": {"one": round(one_ready, 1), "adapters": round(shared_ready, 1)},
    }
    print(json.dumps(results, indent=2))
    write_report(args.output, "serve_adapters_rss", results, machine)


if __name__ == "__main__":
    main()
