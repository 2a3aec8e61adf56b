"""Sentence embedding throughput: `kbert embed`'s encoder vs PyTorch + transformers, on the
same 10,000 real sentences (the first lines of the full movie reviews), all-MiniLM-L6-v2,
mean pooling + normalisation, 2 threads each, measured in one run, alternating.

Ours: `SentenceEncoder` (sorted by length within 4,096-text chunks, batches padded to a
multiple of 8), timed in this process after a warm-up, tokenization included; and the
whole `kbert embed` process (start-up, model load, writing the .npy). PyTorch
(bench/reference/embed_pytorch.py in .venv-torch): batches padded to the longest in each,
in the file's order (a plain transformers loop) and sorted by length (sentence-transformers'
encode()), tokenization included. The vectors of both are compared (cosine).

    .venv/bin/python -m bench.perf.embed_throughput --torch-python .venv-torch/bin/python \\
        --output bench/results/embed_throughput.json
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from bench.common import WORK, machine_info, read_loadavg, run_json_child, wait_for_idle, write_report
from bench.corpora.review_sentences import write_sentences

MINILM_KERAS = os.path.join(WORK, "minilm.keras")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--torch-python", required=True, help="Python of .venv-torch (make .venv-torch/.installed)."
    )
    parser.add_argument("--sentences", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2, help="Alternating rounds of every contender.")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--wait-idle", type=float, default=0, help="Wait up to this many seconds for an idle machine."
    )
    parser.add_argument("--output", default=os.path.join("bench", "results", "embed_throughput.json"))
    args = parser.parse_args(argv)
    import keras

    from keras_bert_impl.cli import main as kbert_main
    from keras_bert_impl.inspection.sentence_encoder import SentenceEncoder

    os.makedirs(WORK, exist_ok=True)
    text = os.path.join(WORK, f"reviews_{args.sentences}.txt")
    count = write_sentences(text, limit=args.sentences)
    if not os.path.isfile(MINILM_KERAS):
        assert (
            kbert_main(
                [
                    "convert",
                    os.path.join("data", "minilm"),
                    "--format",
                    "huggingface",
                    "--output",
                    MINILM_KERAS,
                ]
            )
            == 0
        )
    with open(text, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    encoder = SentenceEncoder(
        keras.saving.load_model(MINILM_KERAS), pooling="mean", normalize=True, batch_size=args.batch_size
    )
    encoder.encode(texts[:512])  # warm-up: the trace and oneDNN's first kernels
    ours, torch_input, torch_length = [], [], []
    vectors = torch_path = None
    for round_ in range(args.rounds):
        start = time.perf_counter()
        vectors = encoder.encode(texts)
        ours.append(time.perf_counter() - start)
        print(f"round {round_}: ours {count / ours[-1]:.1f} sentences/s", flush=True)
        for order, results in (("input", torch_input), ("length", torch_length)):
            torch_path = os.path.join(WORK, "embed_pytorch_vectors.npy")
            results.append(
                run_json_child(
                    [
                        args.torch_python,
                        "-m",
                        "bench.reference.embed_pytorch",
                        "--sentences",
                        text,
                        "--order",
                        order,
                        "--batch-size",
                        str(args.batch_size),
                        "--vectors",
                        torch_path,
                    ]
                )
            )
    reference_vectors = np.load(torch_path)
    cosine = np.sum(vectors * reference_vectors, axis=1)
    # The whole command, as a user runs it: start-up, model load, embedding, writing the file.
    npy = os.path.join(WORK, "embed_throughput_vectors.npy")
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_bert_impl.cli",
            "embed",
            text,
            "--model",
            MINILM_KERAS,
            "--output",
            npy,
            "--normalize",
            "--batch-size",
            str(args.batch_size),
            "--overwrite",
        ],
        check=True,
    )
    process_seconds = time.perf_counter() - start
    np.testing.assert_allclose(np.load(npy), vectors, atol=1e-5)

    ours_rate = count / statistics.median(ours)
    input_rate = statistics.median(r["sentences_per_second"] for r in torch_input)
    length_rate = statistics.median(r["sentences_per_second"] for r in torch_length)
    results = {
        "settings": {
            "sentences": count,
            "source": "first lines of polarity-en-pang&lee1.csv's reviews "
            "(bench/corpora/review_sentences.py)",
            "batch_size": args.batch_size,
            "seq_len": 128,
            "pooling": "mean + L2 normalisation",
            "threads": 2,
            "rounds": args.rounds,
        },
        "ours": {"seconds": ours, "sentences_per_second": ours_rate},
        "ours_kbert_embed_process": {
            "seconds": process_seconds,
            "sentences_per_second": count / process_seconds,
            "includes": "interpreter start-up, TensorFlow import, model load, embedding, .npy",
        },
        "pytorch_input_order": {"runs": torch_input, "sentences_per_second": input_rate},
        "pytorch_length_sorted": {"runs": torch_length, "sentences_per_second": length_rate},
        "speedup_over_pytorch_input_order": ours_rate / input_rate,
        "speedup_over_pytorch_length_sorted": ours_rate / length_rate,
        "cosine_ours_vs_pytorch": {"min": float(cosine.min()), "mean": float(cosine.mean())},
        "loadavg_at_end": read_loadavg(),
        "target": "ours faster than PyTorch + transformers padding to the longest in a batch (issue 18)",
    }
    write_report(
        args.output,
        "Sentence embedding throughput, all-MiniLM-L6-v2, mean pooling, CPU 2 threads",
        results,
        machine,
    )
    print(
        f"ours {ours_rate:.1f}/s; PyTorch input order {input_rate:.1f}/s ({ours_rate / input_rate:.2f}x), "
        f"length-sorted {length_rate:.1f}/s ({ours_rate / length_rate:.2f}x); kbert embed process "
        f"{count / process_seconds:.1f}/s; cosine min {cosine.min():.6f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
