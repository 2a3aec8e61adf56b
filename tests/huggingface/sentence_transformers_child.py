"""Loads an exported folder with sentence-transformers in `.venv-torch` (PyTorch, no TensorFlow)
and writes the vectors it gives.

    python sentence_transformers_child.py FOLDER TEXTS.json OUT.npy [FOLDER TEXTS.json OUT.npy ...]

Several jobs (triples) run in this one process, one after the other: the interpreter's start and
the PyTorch imports cost more than the encoding. Prints one JSON line per job, in order: the
modules SentenceTransformer built and its max_seq_length.
"""

import json
import sys

import numpy as np
from sentence_transformers import SentenceTransformer


def main(folder, texts_path, out_path):
    with open(texts_path, encoding="utf-8") as f:
        texts = json.load(f)
    model = SentenceTransformer(folder, device="cpu")
    np.save(out_path, model.encode(texts, batch_size=32, convert_to_numpy=True))
    print(
        json.dumps(
            {"modules": [type(module).__name__ for module in model], "max_seq_length": model.max_seq_length}
        )
    )


if __name__ == "__main__":
    jobs = sys.argv[1:]
    if not jobs or len(jobs) % 3:
        sys.exit(f"usage: {sys.argv[0]} FOLDER TEXTS.json OUT.npy [...]: got {len(jobs)} arguments")
    for first in range(0, len(jobs), 3):
        main(*jobs[first : first + 3])
