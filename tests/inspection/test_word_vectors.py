"""One word's contextual vectors and the pictures of vectors."""

import numpy as np
import pytest

from keras_bert_impl.inspection.embedding_plot import (
    nearest_neighbour_agreement,
    pca_2d,
    plot_embeddings,
    plot_word_senses,
)
from keras_bert_impl.inspection.word_vectors import word_vectors
from keras_bert_impl.tokenization import BertPreprocessor


def test_whole_word_occurrences_and_their_vectors(minilm):
    sentences = ["the bank of the river", "banks and bankers", "a bank , a bank", "nothing here"]
    vectors, rows = word_vectors(minilm, "bank", sentences, layer=-1)
    assert rows.tolist() == [0, 2, 2]  # "banks" / "bankers" are other words
    x = BertPreprocessor(minilm.vocabulary, lowercase=True, sequence_length=128)(sentences[:1])
    hidden = np.asarray(minilm(x)["sequence_output"])[0]  # [T, H]
    np.testing.assert_allclose(vectors[0], hidden[2], atol=1e-5)  # [CLS] the bank
    # Layer 0 has no context: the same word gets the same vector wherever it stands, but
    # for its position embedding.
    embeddings, _ = word_vectors(minilm, "bank", sentences, layer=0)
    assert not np.allclose(embeddings[1], embeddings[2])  # positions 2 and 5
    with pytest.raises(ValueError, match="occurs in none of the 4 sentences"):
        word_vectors(minilm, "zebra", sentences)
    with pytest.raises(ValueError, match="single word"):
        word_vectors(minilm, "river bank", sentences)
    with pytest.raises(ValueError, match=r"layer must be in \[-7, 6\]"):
        word_vectors(minilm, "bank", sentences, layer=7)


def test_word_split_into_pieces_is_found(minilm):
    pieces = BertPreprocessor(minilm.vocabulary, lowercase=True).tokenize_lists(["unwatchable"])[0]
    assert len(pieces) > 1
    _, rows = word_vectors(minilm, "unwatchable", ["simply unwatchable .", "watchable"])
    assert rows.tolist() == [0]


def test_pca_and_agreement():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(20, 8)) + 5.0, rng.normal(size=(20, 8)) - 5.0
    points, explained = pca_2d(np.concatenate([a, b]))
    assert points.shape == (40, 2) and explained[0] > 0.8
    assert (np.sign(points[:20, 0]) != np.sign(points[20:, 0])).all()
    assert nearest_neighbour_agreement(np.concatenate([a, b]), ["a"] * 20 + ["b"] * 20) == 1.0
    with pytest.raises(ValueError, match="at least 2 vectors"):
        pca_2d(np.zeros((1, 4)))


def test_plots(tmp_path):
    from matplotlib.image import imread

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(30, 6))
    counts = plot_embeddings(vectors, ["x"] * 10 + ["y"] * 20, str(tmp_path / "map.png"))
    assert counts == {"x": 10, "y": 20} and imread(str(tmp_path / "map.png"))[..., :3].std() > 0.05
    plot_word_senses(
        vectors,
        [f"sentence {i} with play" for i in range(30)],
        "play",
        str(tmp_path / "w.png"),
        groups=["noun"] * 15 + ["verb"] * 15,
    )
    assert imread(str(tmp_path / "w.png")).shape[:2] == (800, 1000)
    with pytest.raises(ValueError, match="at most 20 colours"):
        plot_embeddings(vectors, [str(i) for i in range(30)], str(tmp_path / "x.png"))
    with pytest.raises(ValueError, match="one label per vector"):
        plot_embeddings(vectors, ["x"], str(tmp_path / "x.png"))
