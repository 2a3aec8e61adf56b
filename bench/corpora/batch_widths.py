"""How wide MR's training batches are with length buckets and with random batches: the figure
of docs/training.md ("The buckets' batches average ... tokens wide").

MR's 3,200 training sentences (the benches' stratified 80/20 split, seed 0), wordpieces at
length 64 with the real MiniLM vocabulary, batch 32, 3 passes: each batch's width is its
longest row rounded up to 8 (what `cut_to_longest` trains on) and, beside it, cut exactly.
Tokenization only, no model: about 20 s.

    .venv/bin/python -m bench.corpora.batch_widths
"""

import argparse
import os

import numpy as np
import tensorflow as tf

from bench.common import DATA
from bench.corpora.mr_split import load_mr, mr_split
from keras_bert_impl.data.length_buckets import bucketed_batch_indices, wordpiece_lengths
from keras_bert_impl.tokenization import BertPreprocessor


def mean_width(lengths, batches, multiple, sequence_length):
    """The mean over `batches` of each batch's longest row rounded up to `multiple` (at most
    `sequence_length`)."""
    return float(
        np.mean([min(sequence_length, -(-int(lengths[b].max()) // multiple) * multiple) for b in batches])
    )


def random_batches(count, batch_size, seed, epochs):
    """A fresh permutation per pass cut into batches: no sorting."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(epochs):
        order = rng.permutation(count)
        batches += [order[i : i + batch_size] for i in range(0, count, batch_size)]
    return batches


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--vocab", default=os.path.join(DATA, "minilm", "vocab.txt"))
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    texts, labels = load_mr()
    train, _ = mr_split(texts, labels, seed=0)
    preprocessor = BertPreprocessor(args.vocab, sequence_length=args.seq_len)
    lengths = wordpiece_lengths(preprocessor, tf.constant([texts[i] for i in train]))
    print(
        f"{len(lengths)} MR training sentences, length {args.seq_len}, batch {args.batch_size}, "
        f"{args.epochs} passes; mean batch width in tokens:"
    )
    for seed in range(args.seeds):
        buckets = bucketed_batch_indices(lengths, args.batch_size, seed, args.epochs)
        shuffled = random_batches(len(lengths), args.batch_size, seed, args.epochs)
        print(
            f"seed {seed}: buckets {mean_width(lengths, buckets, 8, args.seq_len):.1f} "
            f"(exact {mean_width(lengths, buckets, 1, args.seq_len):.1f}), "
            f"random batches {mean_width(lengths, shuffled, 8, args.seq_len):.1f} "
            f"(exact {mean_width(lengths, shuffled, 1, args.seq_len):.1f})"
        )


if __name__ == "__main__":
    main()
