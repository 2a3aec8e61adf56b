"""Semantic search over every sentence of the 1,500 full movie reviews (48,659 lines of
polarity-en-pang&lee1.csv): index build time, query latency p50/p99 and recall@10 of faiss'
HNSW graph against exact search, with all-MiniLM-L6-v2 (mean pooling + normalisation).

Queries are 1,000 MR sentences (polarity-en-pang&lee2.csv: other reviews), drawn with seed 0.
Latency is measured per query, one at a time as `kbert search` answers them: the query's
embedding plus the search, and the search alone.

    .venv/bin/python -m bench.perf.semantic_search --output bench/results/semantic_search.json
"""

import argparse
import os
import shutil
import sys
import time

import numpy as np

from bench.common import WORK, machine_info, read_loadavg, wait_for_idle, write_report
from bench.corpora.mr_split import load_mr
from bench.corpora.review_sentences import review_sentences

MINILM_KERAS = os.path.join(WORK, "minilm.keras")


def _percentiles(seconds):
    ms = np.asarray(seconds) * 1000
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
    }


def _folder_bytes(path):
    return sum(os.path.getsize(os.path.join(path, name)) for name in os.listdir(path))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument(
        "--limit", type=int, default=None, help="Index only the first N sentences (a smoke run)."
    )
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "semantic_search.json"))
    args = parser.parse_args(argv)
    import keras

    from keras_bert_impl.cli import main as kbert_main
    from keras_bert_impl.inspection.sentence_encoder import SentenceEncoder
    from keras_bert_impl.inspection.vector_index import VectorIndex

    os.makedirs(WORK, exist_ok=True)
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
    sentences = review_sentences(limit=args.limit)
    mr_texts, _ = load_mr()
    queries = [
        mr_texts[i] for i in np.random.default_rng(0).choice(len(mr_texts), args.queries, replace=False)
    ]
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    encoder = SentenceEncoder(keras.saving.load_model(MINILM_KERAS), pooling="mean", normalize=True)
    encoder.encode(sentences[:256])  # warm-up
    start = time.perf_counter()
    vectors = np.concatenate(list(encoder.encode_stream(sentences)))
    embed_seconds = time.perf_counter() - start
    print(f"embedded {len(sentences)} sentences in {embed_seconds:.1f} s", flush=True)
    config = encoder.config()
    indexes, build = {}, {}
    for method in ("exact", "hnsw"):
        start = time.perf_counter()
        indexes[method] = VectorIndex(vectors, sentences, encoder.fingerprint(), config, method=method)
        build[method] = {"seconds": time.perf_counter() - start}
        folder = os.path.join(WORK, f"semantic_search_{method}")
        start = time.perf_counter()
        indexes[method].save(folder)
        build[method]["save_seconds"] = time.perf_counter() - start
        build[method]["folder_bytes"] = _folder_bytes(folder)
        start = time.perf_counter()
        VectorIndex.load(folder)
        build[method]["load_seconds"] = time.perf_counter() - start  # includes checking every file's sha256
        shutil.rmtree(folder)
    latency = {method: {"embed_and_search": [], "search_only": []} for method in indexes}
    hits = {method: [] for method in indexes}
    for query in queries:
        for method, index in indexes.items():
            start = time.perf_counter()
            q = encoder.encode([query])
            embedded = time.perf_counter()
            result = index.search(q, k=10)[0]
            done = time.perf_counter()
            latency[method]["embed_and_search"].append(done - start)
            latency[method]["search_only"].append(done - embedded)
            hits[method].append({h["id"] for h in result})
    recall = float(np.mean([len(a & e) / len(e) for a, e in zip(hits["hnsw"], hits["exact"])]))
    results = {
        "settings": {
            "sentences": len(sentences),
            "source": "every non-blank line of polarity-en-pang&lee1.csv's "
            "1,500 reviews (bench/corpora/review_sentences.py)",
            "queries": len(queries),
            "query_source": "MR sentences (polarity-en-pang&lee2.csv), seed 0",
            "k": 10,
            "pooling": "mean + L2 normalisation",
            "seq_len": 128,
            "faiss_hnsw": {"M": 32, "efConstruction": 200, "efSearch": 128},
        },
        "embedding": {
            "seconds": embed_seconds,
            "sentences_per_second": len(sentences) / embed_seconds,
            "truncated": encoder.truncated,
        },
        "build": build,
        "latency": {
            method: {kind: _percentiles(values) for kind, values in kinds.items()}
            for method, kinds in latency.items()
        },
        "recall_at_10_hnsw_vs_exact": recall,
        "loadavg_at_end": read_loadavg(),
    }
    write_report(
        args.output,
        "Semantic search over the full movie reviews' sentences, all-MiniLM-L6-v2, CPU",
        results,
        machine,
    )
    print(
        f"recall@10 {recall:.4f}; exact search p50 "
        f"{results['latency']['exact']['search_only']['p50_ms']:.2f} ms, hnsw p50 "
        f"{results['latency']['hnsw']['search_only']['p50_ms']:.2f} ms; hnsw build "
        f"{build['hnsw']['seconds']:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
