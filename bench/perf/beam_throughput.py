"""Apache Beam's DirectRunner against the one-process commands on the same inputs: pretraining
examples/s (`kbert pretrain-data --randomness keyed` vs `--runner direct --workers N`) and
sentences/s of `kbert embed` (all-MiniLM-L6-v2, mean pooling), each whole command timed in a
fresh child process (start-up, TensorFlow import and model loads included), and the peak
resident memory of a worker process at 1x and 10x the corpus (the same --split-bytes, so each
worker's task is the same size: the figure should stay flat).

The peak memory of the worker processes is the child processes' ru_maxrss of the process that
ran the pipeline (the largest worker's peak); the one-process figure is that process's own.

    .venv/bin/python -m bench.perf.beam_throughput --output bench/results/beam_throughput.json
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from bench.common import (
    MINILM,
    MINILM_VOCAB,
    MR,
    REVIEWS,
    WORK,
    machine_info,
    read_loadavg,
    wait_for_idle,
    write_report,
)


def child(argv):
    """Runs `kbert ARGV` in this process; prints seconds and peak memory (MiB) as JSON. The clock
    starts before the library's import (TensorFlow's and Keras', which both paths' launching
    process pays, as a user's `kbert` does); `import_seconds` and `run_seconds` split it."""
    start = time.perf_counter()
    from keras_bert_impl.cli import main

    imported = time.perf_counter()
    code = main(argv)
    end = time.perf_counter()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "code": code,
                "seconds": end - start,
                "import_seconds": imported - start,
                "run_seconds": end - imported,
                "peak_mib": own,
                "worker_peak_mib": workers,
            }
        )
    )


def timed(argv):
    out = subprocess.run(
        [sys.executable, "-m", "bench.perf.beam_throughput", "--child", *map(str, argv)],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    if result["code"] != 0:
        raise RuntimeError(f"kbert {' '.join(map(str, argv))} exited {result['code']}")
    return result


def review_files(folder, reviews, copies):
    """The first `reviews` Pang & Lee reviews as text files, 4 files per copy."""
    from keras_bert_impl.data import PretrainingCorpus, documents_to_text

    os.makedirs(folder, exist_ok=True)
    documents = []
    for document in PretrainingCorpus(REVIEWS, format="reviews-csv"):
        documents.append(document)
        if len(documents) == reviews:
            break
    quarter = -(-len(documents) // 4)
    for copy in range(copies):
        for part in range(4):
            with open(os.path.join(folder, f"copy{copy:03d}-{part}.txt"), "w", encoding="utf-8") as f:
                f.write(documents_to_text(documents[part * quarter : (part + 1) * quarter]))
    return os.path.join(folder, "*.txt")


def pretraining(work, reviews, scale, workers, split_bytes):
    files = review_files(os.path.join(work, f"reviews_x{scale}"), reviews, scale)
    base = [
        "pretrain-data",
        files,
        "--vocab",
        MINILM_VOCAB,
        "--dupe-factor",
        1,
        "--split-bytes",
        split_bytes,
        "--num-shards",
        4,
        "--quiet",
        "--overwrite",
    ]
    rows = {}
    for name, extra in (
        ("one_process", ["--randomness", "keyed"]),
        ("direct", ["--runner", "direct", "--workers", workers]),
    ):
        output = os.path.join(work, f"records_x{scale}_{name}")
        result = timed(base + ["--output", output, *extra])
        with open(os.path.join(output, "pretraining.json"), encoding="utf-8") as f:
            result["examples"] = json.load(f)["examples"]
        result["examples_per_s"] = result["examples"] / result["seconds"]
        rows[name] = result
    rows["ratio_direct_to_one_process"] = (
        rows["direct"]["examples_per_s"] / rows["one_process"]["examples_per_s"]
    )
    rows["ratio_without_import"] = run_ratio(rows)
    return rows


def run_ratio(rows):
    """The ratio with the launching process's library import left out of both times (how
    results files before import_seconds was recorded timed the commands)."""
    return rows["one_process"]["run_seconds"] / rows["direct"]["run_seconds"]


def embedding(work, sentences, workers):
    import csv

    model = os.path.join(work, "minilm.keras")
    if not os.path.exists(model):
        timed(["convert", MINILM, "--format", "huggingface", "--output", model])
    with open(MR, encoding="utf-8-sig", newline="") as f:
        texts = [" ".join(text.split()) for _, text in csv.reader(f)]
    # Past the file's 10,662 sentences they come round again: the same work per sentence.
    texts = (texts * -(-sentences // len(texts)))[:sentences]
    source = os.path.join(work, f"mr_{len(texts)}.txt")
    with open(source, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    one = timed(["embed", source, "--model", model, "--output", os.path.join(work, "mr.npy"), "--overwrite"])
    beam = timed(
        [
            "embed",
            source,
            "--model",
            model,
            "--output",
            os.path.join(work, "mr_shards"),
            "--overwrite",
            "--runner",
            "direct",
            "--workers",
            workers,
            "--lines-per-shard",
            -(-len(texts) // (2 * workers)),
        ]
    )
    for row in (one, beam):
        row["sentences"] = len(texts)
        row["sentences_per_s"] = len(texts) / row["seconds"]
    return {
        "one_process": one,
        "direct": beam,
        "ratio_direct_to_one_process": beam["sentences_per_s"] / one["sentences_per_s"],
        "ratio_without_import": run_ratio({"one_process": one, "direct": beam}),
    }


def main(argv=None):
    if argv is None and sys.argv[1:2] == ["--child"]:
        return child(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--reviews", type=int, default=400, help="Reviews in the 1x pretraining corpus.")
    parser.add_argument(
        "--scales", type=int, nargs="*", default=[1, 10], help="Corpus sizes; none: embedding only."
    )
    parser.add_argument("--split-bytes", type=int, default=100_000)
    parser.add_argument(
        "--sentences", type=int, default=4000, help="MR sentences embedded (cycled past the file's)."
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work", default=os.path.join(WORK, "beam_throughput"))
    parser.add_argument(
        "--wait-idle", type=float, default=0, help="Wait up to this many seconds for an idle machine."
    )
    parser.add_argument("--output", default=os.path.join("bench", "results", "beam_throughput.json"))
    args = parser.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    load_before = read_loadavg()
    results = {
        "settings": {
            "reviews": args.reviews,
            "scales": args.scales,
            "split_bytes": args.split_bytes,
            "sentences": args.sentences,
            "workers": args.workers,
        },
        "pretraining": {
            f"x{scale}": pretraining(args.work, args.reviews, scale, args.workers, args.split_bytes)
            for scale in args.scales
        },
        "embedding": embedding(args.work, args.sentences, args.workers),
        "loadavg_before": load_before,
    }
    write_report(args.output, "beam_throughput", results, machine)


if __name__ == "__main__":
    main()
