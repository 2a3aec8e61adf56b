"""VectorIndex: exact search against a brute-force sort, HNSW recall against exact, and the
folder's integrity checks."""

import json
import os

import numpy as np
import pytest

from keras_bert_impl.inspection.vector_index import VectorIndex


def _clustered(n, dim=32, centres=40, seed=0):
    """Unit vectors in clusters, like sentence vectors (uniform random vectors have no near neighbours)."""
    rng = np.random.default_rng(seed)
    middle = rng.normal(size=(centres, dim))
    x = middle[rng.integers(0, centres, n)] + 0.5 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_exact_search_is_a_full_sort():
    vectors = _clustered(500)
    queries = _clustered(7, seed=1)
    index = VectorIndex(vectors, [f"t{i}" for i in range(500)], fingerprint="f", encoder={}, method="exact")
    for query, hits in zip(queries, index.search(queries, k=10)):
        expected = np.argsort(-(vectors @ query), kind="stable")[:10]
        assert [h["id"] for h in hits] == expected.tolist()
        np.testing.assert_allclose([h["score"] for h in hits], (vectors @ query)[expected], atol=1e-6)
        assert hits[0]["text"] == f"t{expected[0]}"


def test_hnsw_recall_against_exact_and_round_trip(tmp_path):
    vectors, queries = _clustered(5000), _clustered(100, seed=1)
    index = VectorIndex(
        vectors, [str(i) for i in range(5000)], fingerprint="f", encoder={"pooling": "mean"}, method="hnsw"
    )
    approximate = index.search(queries, k=10)
    exact = index.search(queries, k=10, exact=True)
    recall = np.mean(
        [len({h["id"] for h in a} & {h["id"] for h in e}) / 10 for a, e in zip(approximate, exact)]
    )
    assert recall >= 0.95, recall
    index.save(str(tmp_path / "index"))
    loaded = VectorIndex.load(str(tmp_path / "index"))
    assert loaded.method == "hnsw" and loaded.encoder == {"pooling": "mean"} and loaded.fingerprint == "f"
    assert loaded.search(queries, k=10) == approximate
    assert not [p for p in os.listdir(tmp_path) if "partial" in p]


def test_auto_method_and_normalisation():
    index = VectorIndex(np.array([[3.0, 0.0], [0.0, 0.5]]), ["x", "y"], fingerprint="f", encoder={})
    assert index.method == "exact"
    np.testing.assert_allclose(np.linalg.norm(index.vectors, axis=1), 1.0)
    assert index.search([[0.0, 2.0]], k=5)[0][0] == {"id": 1, "score": pytest.approx(1.0), "text": "y"}


def test_a_damaged_folder_is_refused(tmp_path):
    path = str(tmp_path / "index")
    VectorIndex(_clustered(50), [str(i) for i in range(50)], fingerprint="f", encoder={}).save(path)
    with open(os.path.join(path, "vectors.npy"), "r+b") as f:
        f.truncate(1000)
    with pytest.raises(ValueError, match="vectors.npy does not match its checksum"):
        VectorIndex.load(path)
    os.remove(os.path.join(path, "vectors.npy"))
    with pytest.raises(ValueError, match="vectors.npy is missing"):
        VectorIndex.load(path)
    with open(os.path.join(path, "manifest.json"), "w") as f:
        f.write("{not json")
    with pytest.raises(ValueError, match="manifest.json is corrupt"):
        VectorIndex.load(path)
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump({"format": "something else"}, f)
    with pytest.raises(ValueError, match="not a keras_bert_impl.vector_index/1 manifest"):
        VectorIndex.load(path)
    with pytest.raises(ValueError, match="no manifest.json"):
        VectorIndex.load(str(tmp_path))


@pytest.mark.parametrize(
    "vectors, texts, kwargs, message",
    [
        (np.zeros((0, 4)), [], {}, "non-empty"),
        (np.ones((2, 4)), ["a"], {}, "pair up"),
        (np.ones((2, 4)), ["a", "b"], {"method": "ivf"}, "method"),
    ],
)
def test_bad_arguments(vectors, texts, kwargs, message):
    with pytest.raises(ValueError, match=message):
        VectorIndex(vectors, texts, fingerprint="f", encoder={}, **kwargs)
