"""`make demo`: sentence similarity and semantic search with the converted MiniLM.

Loads the .keras model written by `kbert convert`, tokenizes in the graph with
the vocabulary saved inside it, and embeds with mean pooling + L2
normalisation (the published recipe of all-MiniLM-L6-v2).
"""

import argparse
import csv
import time

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.models.bert_embedder import BertEmbedder
from keras_bert_impl.tokenization import BertPreprocessor

PAIRS = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar.",
    "The stock market fell sharply today.",
    "Share prices dropped a lot this afternoon.",
    "A cat sleeps on the warm windowsill.",
]
QUERIES = ["a wonderful, moving film", "boring and far too long"]


def read_mr(path, limit):
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = [(int(label), text.strip()) for label, text in csv.reader(f)]
    return rows[: limit // 2] + rows[-limit // 2 :]  # the file holds positives first, then negatives


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--model", required=True, help=".keras file from `kbert convert`.")
    parser.add_argument("--corpus", required=True, help="MR sentence-polarity CSV (label,text).")
    parser.add_argument("--search-size", type=int, default=1000, help="How many MR sentences to search.")
    args = parser.parse_args()

    backbone = keras.saving.load_model(args.model)
    preprocessor = BertPreprocessor.from_model(backbone, sequence_length=64)
    embedder = BertEmbedder(backbone, pooling="mean", normalize=True)

    def embed(texts):
        return embedder.predict(preprocessor(tf.constant(texts)), batch_size=64, verbose=0)["embeddings"]

    emb = embed(PAIRS)
    print("Cosine similarity of the MiniLM sentence embeddings:")
    for i, text in enumerate(PAIRS):
        print(f"  [{i}] {text}")
    # Columns 8 wide, right-aligned, so a negative cosine (-0.083) keeps them in line.
    print("      " + "".join(f"{f'[{j}]':>8}" for j in range(len(PAIRS))))
    for i in range(len(PAIRS)):
        print(f"  [{i}] " + "".join(f"{emb[i] @ emb[j]:>8.3f}" for j in range(len(PAIRS))))

    rows = read_mr(args.corpus, args.search_size)
    start = time.perf_counter()
    corpus = embed([text for _, text in rows])
    seconds = time.perf_counter() - start
    print(
        f"\nEmbedded {len(rows)} movie-review sentences in {seconds:.1f} s ({len(rows) / seconds:.0f} "
        "sentences/s)."
    )
    labels = np.array([label for label, _ in rows])
    for query, q in zip(QUERIES, embed(QUERIES)):
        scores = corpus @ q
        top = np.argsort(-scores)[:3]
        print(f"\nNearest reviews to {query!r}:")
        for k in top:
            print(f"  {scores[k]:.3f} [{'+' if labels[k] > 0 else '-'}] {rows[k][1][:100]}")
        print(
            "  label agreement of the 25 nearest: "
            f"{np.mean(labels[np.argsort(-scores)[:25]] == (1 if 'wonderful' in query else -1)):.0%}"
        )


if __name__ == "__main__":
    main()
