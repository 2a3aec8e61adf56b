"""PretrainingExampleBuilder: Google's pairing, checked against Google's code and the source text."""

import random

import numpy as np
import pytest

from keras_bert_impl.data import PretrainingCorpus, PretrainingExampleBuilder
from keras_bert_impl.tokenization.vocabulary import load_vocabulary
from tests.data.helpers import CLS, SEP, GoogleTokenizerStub, original_ids


def _key(token_ids, segment_ids, is_random_next, positions, labels):
    return (tuple(token_ids), tuple(segment_ids), bool(is_random_next), tuple(positions), tuple(labels))


def test_pipeline_matches_google_create_training_instances(review_subset_file, vocab_path):
    """300 real reviews in Google's text format, through Google's
    create_training_instances (bert-tensorflow 1.0.4) and through ours with
    balanced_nsp=False and a buffer that holds the corpus: the same instances,
    every token, segment id, label and mask (Google then shuffles them all; we
    compare them as multisets)."""
    from bert import create_pretraining_data as google

    vocab = load_vocabulary(vocab_path)
    corpus = PretrainingCorpus(review_subset_file)
    stub = GoogleTokenizerStub(vocab, [s for d in corpus for s in d])
    theirs = google.create_training_instances(
        [review_subset_file], stub, 128, 2, 0.1, 0.15, 20, random.Random(12345)
    )
    builder = PretrainingExampleBuilder(
        vocab, dupe_factor=2, balanced_nsp=False, document_buffer_size=300, seed=12345
    )
    ours = list(builder.instances(corpus))
    assert len(ours) == len(theirs) > 5000
    ids = stub.convert_tokens_to_ids
    expected = sorted(
        _key(ids(i.tokens), i.segment_ids, i.is_random_next, i.masked_lm_positions, ids(i.masked_lm_labels))
        for i in theirs
    )
    assert sorted(_key(*i) for i in ours) == expected


def test_nsp_labels_are_balanced_on_reviews(review_instances):
    not_next = np.mean([i.is_random_next for i in review_instances])
    assert len(review_instances) > 10_000
    assert abs(not_next - 0.5) <= 0.01, not_next


def test_google_nsp_is_not_balanced_on_reviews(reviews, vocab_path):
    """Why balanced_nsp is the default: Google's rule forces NotNext for every
    one-sentence chunk, which on these reviews gives ~54% NotNext."""
    instances = PretrainingExampleBuilder(vocab_path, dupe_factor=1, balanced_nsp=False).instances(reviews)
    not_next = np.mean([i.is_random_next for i in instances])
    assert 0.53 < not_next < 0.56, not_next


def _segments(instance):
    ids = original_ids(instance)
    first_sep = ids.index(SEP)
    return np.array(ids[1:first_sep]), np.array(ids[first_sep + 1 : -1])


def test_isnext_pairs_are_consecutive_in_the_source(review_instances, source):
    """Each IsNext pair, found in the reviews re-read from the CSV: A and B are
    in the same review, B after A, with a sentence boundary between them; when
    nothing was truncated (fewer than 125 tokens), B starts exactly where A ends,
    at a sentence start."""
    is_next = [i for i in review_instances if not i.is_random_next]
    rng = np.random.default_rng(0)
    checked = untruncated = 0
    for k in rng.choice(len(is_next), 800, replace=False):
        a, b = _segments(is_next[k])
        found = False
        for start in source.find(a):
            end = start + len(a)
            doc = source.document[start]
            doc_end = (
                end + np.argmax(source.document[end:] != doc)
                if (source.document[end:] != doc).any()
                else len(source.ids)
            )
            for b_start in source.find(b, end, doc_end):
                if (
                    source.boundary[end : b_start + 1].any()
                    and source.document[start] == source.document[end - 1] == doc
                ):
                    found = True
                    if len(a) + len(b) < 125:
                        untruncated += 1
                        assert b_start == end and source.boundary[end], (a, b)
                    break
            if found:
                break
        assert found, f"IsNext pair not consecutive in the source: A={a.tolist()} B={b.tolist()}"
        checked += 1
    assert checked == 800 and untruncated > 50


def test_notnext_segments_come_from_another_review(review_instances, source):
    """NotNext B is real text from a different review than A (Google's random document)."""
    not_next = [i for i in review_instances if i.is_random_next]
    rng = np.random.default_rng(1)
    for k in rng.choice(len(not_next), 300, replace=False):
        a, b = _segments(not_next[k])
        docs_a = {source.document[p] for p in source.find(a)}
        docs_b = {source.document[p] for p in source.find(b)}
        assert docs_a and docs_b, "segments must be source text"
        assert docs_b - docs_a or len(docs_a) > 1, (a, b)


def test_instances_are_well_formed(review_instances):
    lengths = []
    for instance in review_instances:
        ids, segments = instance.token_ids, instance.segment_ids
        assert len(ids) == len(segments) <= 128
        first_sep = ids.index(SEP)
        assert ids[0] == CLS and first_sep >= 2 and len(ids) - first_sep >= 3  # A and B non-empty
        assert segments == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        lengths.append(len(ids))
    lengths = np.array(lengths)
    # short_seq_prob=0.1 of documents get a random shorter target: many short sequences, most near full.
    assert (lengths == 128).mean() > 0.5 and (lengths < 64).mean() > 0.03


def test_streaming_holds_at_most_the_document_buffer(review_subset_file, vocab_path, monkeypatch):
    builder = PretrainingExampleBuilder(vocab_path, dupe_factor=3, document_buffer_size=40, seed=1)
    pools, calls = [], 0
    original = builder.instances_from_document

    def spy(documents, index, rng):
        nonlocal calls
        calls += 1
        pools.append(len(documents))
        return original(documents, index, rng)

    monkeypatch.setattr(builder, "instances_from_document", spy)
    instances = list(builder.instances(PretrainingCorpus(review_subset_file)))
    assert max(pools) == 40 and calls == 3 * 300  # every document, once per pass
    assert abs(np.mean([i.is_random_next for i in instances]) - 0.5) < 0.03


def test_same_seed_same_examples(review_subset_file, vocab_path):
    corpus = PretrainingCorpus(review_subset_file)

    def build(seed):
        builder = PretrainingExampleBuilder(
            vocab_path, dupe_factor=2, document_buffer_size=50, seed=seed, whole_word_masking=True
        )
        return [_key(*i) for i in builder.instances(corpus)]

    first = build(3)
    assert build(3) == first
    assert build(4) != first


def test_dataset_matches_examples(review_subset_file, vocab_path):
    builder = PretrainingExampleBuilder(vocab_path, dupe_factor=1, document_buffer_size=50)
    corpus = PretrainingCorpus(review_subset_file)
    expected = list(builder.examples(corpus))[:20]
    for got, want in zip(builder.as_dataset(corpus).take(20).as_numpy_iterator(), expected):
        assert set(got) == set(want)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
    assert got["input_ids"].dtype == np.int32 and got["masked_lm_weights"].dtype == np.float32


BAD_BUILDER_ARGUMENTS = [
    ({"max_seq_length": 4}, r"max_seq_length must be an integer >= 5. Received: max_seq_length=4"),
    ({"short_seq_prob": 1.5}, r"short_seq_prob must be a number in \[0, 1\]. Received: short_seq_prob=1.5"),
    ({"short_seq_prob": -0.1}, r"short_seq_prob=-0.1"),
    ({"dupe_factor": 0}, r"dupe_factor must be a positive integer. Received: dupe_factor=0"),
    ({"document_buffer_size": 0}, r"document_buffer_size=0"),
    ({"document_buffer_size": 1}, r"document_buffer_size=1"),
    ({"masked_lm_prob": 0}, r"masked_lm_prob=0"),
    ({"max_predictions_per_seq": 0}, r"max_predictions_per_seq=0"),
    ({"seed": -1}, r"seed=-1"),
    ({"balanced_nsp": 1}, r"balanced_nsp=1"),
]


def test_builder_rejects_bad_arguments(vocab_path):
    vocab = load_vocabulary(vocab_path)
    for kwargs, message in BAD_BUILDER_ARGUMENTS:
        with pytest.raises(ValueError, match=message):
            PretrainingExampleBuilder(vocab, **kwargs)


def test_empty_corpus_is_an_error(vocab_path, tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("\n   \n\n", encoding="utf-8")
    builder = PretrainingExampleBuilder(vocab_path, dupe_factor=1)
    with pytest.raises(ValueError, match="The corpus has no text"):
        list(builder.instances(PretrainingCorpus(str(path))))
