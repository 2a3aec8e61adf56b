"""Loads an exported folder with sentence-transformers in `.venv-torch` (PyTorch, no TensorFlow)
and writes the vectors it gives.

    python sentence_transformers_child.py FOLDER TEXTS.json OUT.npy

Prints one JSON line: the modules SentenceTransformer built and its max_seq_length.
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
    main(*sys.argv[1:])
