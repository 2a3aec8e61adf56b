"""A folder of sentence vectors with their texts, searched by cosine similarity.

Exact search is a matrix-vector product in numpy; above `EXACT_LIMIT` vectors the folder
also holds a faiss HNSW graph (faiss-cpu: maintained by Meta, wheels for every platform we
support, and the same index files load in its C++ and GPU builds), searched approximately.
The vectors are always kept, so exact search stays available for checking recall.

Layout of an index folder:
    manifest.json  format, model fingerprint and encoder config, count, dim, method,
                   the sha256 of every other file (checked on load)
    vectors.npy    float32 [N, D], L2-normalised
    texts.jsonl    one JSON string per vector, in order
    hnsw.faiss     the HNSW graph (method "hnsw" only)
"""

import json
import os
import shutil

import numpy as np

from keras_bert_impl.atomic_write import replace_folder
from keras_bert_impl.file_paths import sha256
from keras_bert_impl.validation import check_choice, check_positive_int

FORMAT = "keras_bert_impl.vector_index/1"
METHODS = ("auto", "exact", "hnsw")
# Exact search over 20,000 x 384 floats answers in a few milliseconds; past that, HNSW.
EXACT_LIMIT = 20_000
# HNSW's graph degree and search breadths (faiss' names: M, efConstruction, efSearch).
HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH = 32, 200, 128


def _normalized(vectors):
    vectors = np.asarray(vectors, np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


class VectorIndex:
    """Texts and their vectors, searchable by cosine similarity.

    Args:
        vectors: float [N, D] (normalised here).
        texts: N strings.
        fingerprint: the `SentenceEncoder.fingerprint()` of the model that made the vectors.
        encoder: its `SentenceEncoder.config()`, plus anything worth keeping (the model path).
        method: "exact", "hnsw", or "auto" (hnsw above EXACT_LIMIT vectors).

    Example:
    >>> index = VectorIndex(np.eye(3), ["a", "b", "c"], fingerprint="f", encoder={})
    >>> index.search(np.array([[0.1, 1.0, 0.0]]), k=2)[0][0]["text"]
    'b'
    """

    def __init__(self, vectors, texts, fingerprint, encoder, method="auto"):
        check_choice("method", method, METHODS)
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or not len(vectors):
            raise ValueError(f"vectors must be a non-empty [N, D] array. Received shape {vectors.shape}.")
        if len(texts) != len(vectors):
            raise ValueError(
                f"texts and vectors must pair up. Received {len(texts)} texts and {len(vectors)} vectors."
            )
        self.vectors = _normalized(vectors)
        self.texts = list(texts)
        self.fingerprint = fingerprint
        self.encoder = dict(encoder)
        self.method = ("hnsw" if len(vectors) > EXACT_LIMIT else "exact") if method == "auto" else method
        self._hnsw = self._build_hnsw() if self.method == "hnsw" else None

    def __len__(self):
        return len(self.texts)

    def _build_hnsw(self):
        import faiss

        index = faiss.IndexHNSWFlat(self.vectors.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.add(self.vectors)
        return index

    def search(self, queries, k=10, exact=False):
        """Queries float [Q, D] -> Q lists of up to k {"id", "score", "text"}, best first.
        `exact=True` searches the vectors exhaustively even when the index has a graph."""
        check_positive_int("k", k)
        queries = _normalized(np.atleast_2d(queries))
        if queries.shape[1] != self.vectors.shape[1]:
            raise ValueError(
                f"The queries have {queries.shape[1]} dimensions, the index {self.vectors.shape[1]}."
            )
        k = min(k, len(self))
        if self._hnsw is not None and not exact:
            self._hnsw.hnsw.efSearch = max(HNSW_EF_SEARCH, k)
            scores, ids = self._hnsw.search(queries, k)  # [Q, k] each
        else:
            similarity = queries @ self.vectors.T  # [Q, N]
            ids = np.argpartition(-similarity, k - 1, axis=1)[:, :k]
            top = np.take_along_axis(similarity, ids, axis=1)
            order = np.argsort(-top, axis=1, kind="stable")
            ids, scores = np.take_along_axis(ids, order, axis=1), np.take_along_axis(top, order, axis=1)
        return [
            [
                {"id": int(i), "score": float(s), "text": self.texts[i]}
                for i, s in zip(row_ids, row_scores)
                if i >= 0
            ]
            for row_ids, row_scores in zip(ids, scores)
        ]

    def save(self, path):
        """Writes the folder atomically: a partial folder beside `path`, renamed into place."""
        partial = f"{path.rstrip(os.sep)}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(partial)
        try:
            np.save(os.path.join(partial, "vectors.npy"), self.vectors)
            with open(os.path.join(partial, "texts.jsonl"), "w", encoding="utf-8") as f:
                for text in self.texts:
                    f.write(json.dumps(text, ensure_ascii=False) + "\n")
            files = ["vectors.npy", "texts.jsonl"]
            if self._hnsw is not None:
                import faiss

                faiss.write_index(self._hnsw, os.path.join(partial, "hnsw.faiss"))
                files.append("hnsw.faiss")
            manifest = {
                "format": FORMAT,
                "fingerprint": self.fingerprint,
                "encoder": self.encoder,
                "count": len(self),
                "dim": int(self.vectors.shape[1]),
                "method": self.method,
                "hnsw": {"M": HNSW_M, "efConstruction": HNSW_EF_CONSTRUCTION, "efSearch": HNSW_EF_SEARCH},
                "sha256": {name: sha256(os.path.join(partial, name)) for name in files},
            }
            with open(os.path.join(partial, "manifest.json"), "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=2)
            replace_folder(partial, path)  # the old index goes last: a crash never leaves neither
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise

    @classmethod
    def load(cls, path):
        """Reads a folder written by `save`, checking every file against the manifest.

        Raises:
            ValueError: naming the folder and what is wrong with it (missing, not an index,
                a file changed or cut short).
        """
        manifest_path = os.path.join(path, "manifest.json")
        if not os.path.isdir(path):
            raise ValueError(f"{path!r} is not a folder: pass a folder written by `kbert index`.")
        try:
            with open(manifest_path, encoding="utf-8") as f:
                manifest = json.load(f)
        except FileNotFoundError:
            raise ValueError(
                f"{path!r} has no manifest.json: it is not an index written by `kbert index`."
            ) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(
                f"{manifest_path} is corrupt ({e}): rebuild the index with `kbert index`."
            ) from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ValueError(
                f"{manifest_path} is not a {FORMAT} manifest: rebuild the index with `kbert index`."
            )
        for name, expected in manifest["sha256"].items():
            file = os.path.join(path, name)
            if not os.path.isfile(file) or sha256(file) != expected:
                state = (
                    "is missing"
                    if not os.path.isfile(file)
                    else "does not match its checksum (changed or cut short)"
                )
                raise ValueError(f"Index {path!r}: {name} {state}. Rebuild the index with `kbert index`.")
        vectors = np.load(os.path.join(path, "vectors.npy"))
        with open(os.path.join(path, "texts.jsonl"), encoding="utf-8") as f:
            texts = [json.loads(line) for line in f]
        index = cls.__new__(cls)
        index.vectors, index.texts = vectors, texts
        index.fingerprint, index.encoder, index.method = (
            manifest["fingerprint"],
            manifest["encoder"],
            manifest["method"],
        )
        index._hnsw = None
        if index.method == "hnsw":
            import faiss

            index._hnsw = faiss.read_index(os.path.join(path, "hnsw.faiss"))
        return index
