"""SentenceEncoder on the real all-MiniLM-L6-v2, against PyTorch + transformers' outputs
(tests/fixtures/minilm_reference.npz) and human-written paraphrases."""

import csv
import json
import os

import numpy as np
import pytest

from keras_bert_impl.inspection.sentence_encoder import SentenceEncoder
from keras_bert_impl.models import BertBackbone, BertEmbedder
from keras_bert_impl.tokenization import BertPreprocessor
from tests.conftest import DATA
from tests.harness import tiny_backbone_config

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
REFERENCE = np.load(os.path.join(FIXTURES, "minilm_reference.npz"))
SENTENCES = [str(s) for s in REFERENCE["sentences"]]
MASK = REFERENCE["attention_mask"].astype(bool)  # [B, T]
HIDDEN = REFERENCE["last_hidden_state"]  # [B, T, 384]


def test_published_recipe_reproduces_sentence_transformers(minilm):
    """Mean pooling + normalisation is all-MiniLM-L6-v2's published use; the reference is
    sentence-transformers' recipe computed with PyTorch + transformers."""
    vectors = SentenceEncoder(minilm, pooling="mean", normalize=True, batch_size=3).encode(SENTENCES)
    np.testing.assert_allclose(vectors, REFERENCE["sentence_embedding"], atol=1e-5)


def test_cls_and_max_pooling_match_the_reference_hidden_states(minilm):
    cls = SentenceEncoder(minilm, pooling="cls", normalize=False).encode(SENTENCES)
    np.testing.assert_allclose(cls, HIDDEN[:, 0], atol=1e-4)
    largest = SentenceEncoder(minilm, pooling="max", normalize=False).encode(SENTENCES)
    expected = np.where(MASK[:, :, None], HIDDEN, -np.inf).max(axis=1)
    np.testing.assert_allclose(largest, expected, atol=1e-4)


def test_length_batching_equals_padding_to_the_sequence_length(minilm):
    """Sorted, bucketed batches give what padding every text to 128 gives (BertEmbedder), in input order."""
    rng = np.random.default_rng(0)
    order = rng.permutation(len(SENTENCES))
    texts = [SENTENCES[i] for i in order] + ["", "a"]
    encoder = SentenceEncoder(minilm, pooling="mean", normalize=False, batch_size=4)
    ours = encoder.encode(texts)
    x = BertPreprocessor(minilm.vocabulary, lowercase=minilm.lowercase, sequence_length=128)(texts)
    padded = BertEmbedder(minilm, pooling="mean", normalize=False).predict(x, verbose=0)["embeddings"]
    np.testing.assert_allclose(ours, padded, atol=1e-5)
    assert encoder.truncated == 0


def test_first_last_mean_and_concatenated_layers(minilm):
    backbone = BertBackbone.from_config({**minilm.get_config(), "return_hidden_states": True})
    backbone.set_weights(minilm.get_weights())
    x = BertPreprocessor(minilm.vocabulary, lowercase=True, sequence_length=64)(SENTENCES[:4])
    # Called eagerly on the 4 rows: predict() traced a function per embedder for one batch.
    first = np.asarray(
        BertEmbedder(backbone, pooling="mean", layer_index=1, normalize=False)(x)["embeddings"]
    )
    last = np.asarray(
        BertEmbedder(backbone, pooling="mean", layer_index=-1, normalize=False)(x)["embeddings"]
    )
    ours = SentenceEncoder(minilm, pooling="first-last-mean", normalize=False).encode(SENTENCES[:4])
    np.testing.assert_allclose(ours, (first + last) / 2, atol=1e-5)
    both = SentenceEncoder(minilm, pooling="mean", layers=(-1, 1), normalize=True).encode(SENTENCES[:4])
    assert both.shape == (4, 768)
    np.testing.assert_allclose(np.linalg.norm(both[:, :384], axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(both[:, 384:], first / np.linalg.norm(first, axis=1, keepdims=True), atol=1e-5)


def test_truncation_is_counted_and_keeps_the_final_sep(minilm):
    encoder = SentenceEncoder(minilm, sequence_length=8)
    token_ids, lengths, truncated = encoder.pack(["one two three four five six seven eight nine", "short"])
    assert truncated.tolist() == [True, False] and lengths.tolist() == [8, 3]
    assert token_ids[0, 7] == 102 and token_ids[0, 0] == 101
    encoder.encode(["one two three four five six seven eight nine", "short"])
    assert encoder.truncated == 1


def test_stream_equals_one_pass_and_reports_progress(minilm):
    encoder = SentenceEncoder(minilm, batch_size=4)
    seen = []
    chunks = list(encoder.encode_stream(iter(SENTENCES), chunk_size=4, progress=seen.append))
    assert [len(c) for c in chunks] == [4, 4, 2] and seen == [4, 8, 10]
    np.testing.assert_allclose(np.concatenate(chunks), encoder.encode(SENTENCES), atol=1e-6)


def test_fingerprint_tells_models_and_settings_apart(minilm):
    base = SentenceEncoder(minilm).fingerprint()
    assert SentenceEncoder(minilm).fingerprint() == base
    assert SentenceEncoder(minilm, pooling="cls").fingerprint() != base
    assert SentenceEncoder(minilm, sequence_length=64).fingerprint() != base
    other = BertBackbone.from_config(minilm.get_config())  # same shapes, different (random) weights
    other.set_vocabulary(minilm.vocabulary, minilm.lowercase)
    assert SentenceEncoder(other).fingerprint() != base


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"pooling": "avg"}, "pooling"),
        ({"layers": (7,)}, "layers must be in \\[-7, 6\\]"),
        ({"layers": ()}, "at least one layer"),
        ({"pooling": "first-last-mean", "layers": (-2,)}, "first-last-mean"),
        ({"sequence_length": 1000}, r"sequence_length 1000 is outside 2\.\.512: .* max_sequence_length=512"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_bad_arguments(minilm, kwargs, message):
    with pytest.raises(ValueError, match=message):
        SentenceEncoder(minilm, **kwargs)


def test_a_backbone_without_vocabulary_is_refused():
    with pytest.raises(ValueError, match="no vocabulary"):
        SentenceEncoder(BertBackbone(**tiny_backbone_config()))


def _plagiarism_texts():
    with open(
        os.path.join(DATA, "corpora", "plagiarism-clough&stevenson.csv"), encoding="utf-8-sig", newline=""
    ) as f:
        rows = list(csv.reader(f))
    with open(os.path.join(FIXTURES, "paraphrase_triples.json"), encoding="utf-8") as f:
        triples = json.load(f)["triples"]
    for t in triples:  # the same corpus file the fixture was made from
        assert rows[t["anchor_row"]][0].startswith(t["anchor_prefix"])
        assert rows[t["unrelated_source_of_row"]][1].startswith(t["unrelated_prefix"])
    return rows, triples


@pytest.mark.slow  # about 20 s or more: MiniLM over sentence pairs
def test_paraphrases_rank_above_unrelated_text(minilm):
    """38 real triples (tests/fixtures/make_paraphrase_triples.py): a student's heavy or light
    revision of a Wikipedia text is nearer that text than another topic's; and, the harder
    variant, nearer its source than an independent answer to the same question."""
    rows, triples = _plagiarism_texts()
    encoder = SentenceEncoder(minilm, pooling="mean", normalize=True, sequence_length=256)
    vectors = encoder.encode([row[0] for row in rows])  # [rows, 384]
    sources = encoder.encode([row[1] for row in rows])
    wins = [
        vectors[t["anchor_row"]] @ sources[t["anchor_row"]]
        > vectors[t["anchor_row"]] @ sources[t["unrelated_source_of_row"]]
        for t in triples
    ]
    hard = {kind: [] for kind in ("heavy revision", "light revision")}
    for t in triples:
        a = vectors[t["anchor_row"]]
        hard[t["kind"]] += [a @ sources[t["anchor_row"]] > a @ vectors[j] for j in t["hard_negative_rows"]]
    accuracy = float(np.mean(wins))
    print(
        f"paraphrase above unrelated: {accuracy:.3f} of {len(wins)}; above a same-topic independent answer: "
        + ", ".join(f"{kind} {np.mean(v):.3f} of {len(v)}" for kind, v in hard.items())
    )
    assert len(wins) >= 30
    assert accuracy == 1.0
    # Same topic, written independently: harder, and the light revisions are the easier half.
    assert np.mean(hard["light revision"]) > np.mean(hard["heavy revision"]) > 0.5


def test_stream_reads_its_input_one_chunk_at_a_time(minilm):
    """Memory is bounded by the chunk: the first vectors come out before the rest of the input is read."""
    pulled = []

    def texts():
        for i in range(100):
            pulled.append(i)
            yield f"sentence number {i}"

    stream = SentenceEncoder(minilm, batch_size=8).encode_stream(texts(), chunk_size=16)
    first = next(stream)
    assert first.shape == (16, 384) and len(pulled) == 16
    assert sum(len(chunk) for chunk in stream) == 84 and len(pulled) == 100
