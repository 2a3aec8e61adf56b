"""BertPreprocessor vs Hugging Face's fast BertTokenizer, id for id, on 52,659 real sentences.

The sentences and pairs are described in tests/tokenization/references.py.
Each test runs on all of them (marked slow: ~20-30 s each on the busy 2-core
machine) and on the 4,000 MR sentences alone (the quick loop). Singles are
packed at 128 (28 review sentences are longer, so truncation happens too);
pairs at 32, where most pairs must be truncated, and at 31. Each test prints
its example and mismatch counts (pytest -s).

Pair truncation: we implement Google's `_truncate_seq_pair`; `tokenizers`'
`longest_first` differs from it in exactly one class of pairs (odd budget, both
segments longer than half of it, B at least as long as A), which
`test_hf_longest_first_vs_google_truncation` pins on a grid of lengths. So at
32 (budget 29, odd) our pairs are compared with Hugging Face's untruncated
pieces truncated by Google's rule, and every pair where Hugging Face's own
truncation differs must be of that class; at 31 (budget 28, even) they are
compared with Hugging Face's own truncation directly.
"""

import itertools
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.tokenization import BertPreprocessor
from tests.conftest import REPO
from tests.tokenization import references

BATCH = 4096
CORPORA = [pytest.param("all", marks=pytest.mark.slow), "mr"]


def _ours(sequence_length, a, b=None):
    pre = BertPreprocessor(references.VOCAB, sequence_length=sequence_length)
    spec = [tf.TensorSpec([None], tf.string)] * (1 if b is None else 2)
    call = tf.function(lambda *x: pre(x if len(x) == 2 else x[0]), input_signature=spec)
    outs = []
    for i in range(0, len(a), BATCH):
        args = [tf.constant(a[i : i + BATCH])] + ([tf.constant(b[i : i + BATCH])] if b is not None else [])
        out = call(*args)
        outs.append(np.stack([out[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")], 1))
    return np.concatenate(outs)  # [N, 3, S]


def _hf(sequence_length, a, b=None):
    tokenizer = references.hf_tokenizer(sequence_length)
    encs = tokenizer.encode_batch(list(a) if b is None else list(zip(a, b)))
    return np.array([[e.ids, e.type_ids, e.attention_mask] for e in encs], np.int64)


def _mismatches(ours, expected):
    return np.flatnonzero((ours != expected).any(axis=(1, 2)))


def test_reference_is_the_uncased_fast_bert_tokenizer():
    tokenizer = references.hf_tokenizer()
    config = json.loads(tokenizer.to_str())
    normalizer, model = config["normalizer"], config["model"]
    assert normalizer["type"] == "BertNormalizer" and normalizer["lowercase"] is True
    # strip_accents None means "follow lowercase" in tokenizers' BertNormalizer.
    assert normalizer["strip_accents"] in (None, True)
    assert normalizer["clean_text"] and normalizer["handle_chinese_chars"]
    assert config["pre_tokenizer"]["type"] == "BertPreTokenizer"
    assert model["type"] == "WordPiece" and model["max_input_chars_per_word"] == references.MAX_CHARS_PER_WORD
    assert tokenizer.normalizer.normalize_str("ÉCOLE Naïve Ångström") == "ecole naive angstrom"
    assert [tokenizer.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]")] == [0, 100, 101, 102]


def test_corpus_size():
    sentences = references.corpus("all")
    assert len(sentences) == 52659 and all(s == s.strip() and s for s in sentences)
    assert len(references.pairs_of(sentences)[0]) == 26329


@pytest.mark.parametrize("corpus", CORPORA)
def test_real_sentences_match_hugging_face_at_128(corpus):
    sentences = references.corpus(corpus)
    ours, hf = _ours(128, sentences), _hf(128, sentences)
    bad = _mismatches(ours, hf)
    truncated = int((hf[:, 2].sum(1) == 128).sum())
    print(
        f"\n{corpus}: single sentences @128: {len(sentences)} examples ({truncated} filling all 128), "
        f"{len(bad)} mismatches"
    )
    assert len(bad) == 0, [(sentences[i], ours[i, 0].tolist(), hf[i, 0].tolist()) for i in bad[:3]]


def _google_truncated_hf(sequence_length, a, b):
    """Hugging Face's pieces (untruncated), truncated with Google's _truncate_seq_pair and packed."""
    pieces_a, pieces_b = references.hf_pieces(a), references.hf_pieces(b)
    packed = []
    for pa, pb in zip(pieces_a, pieces_b):
        packed.append(
            references.pack(*references.google_truncate_pair(pa, pb, sequence_length - 3), sequence_length)
        )
    return np.array(packed, np.int64), pieces_a, pieces_b


def _hf_and_google_differ(len_a, len_b, budget):
    return budget % 2 == 1 and min(len_a, len_b) > budget // 2 and len_b >= len_a


@pytest.mark.parametrize("corpus", CORPORA)
def test_real_pairs_match_google_truncation_at_32(corpus):
    a, b = references.pairs_of(references.corpus(corpus))
    ours = _ours(32, a, b)
    expected, pieces_a, pieces_b = _google_truncated_hf(32, a, b)
    bad = _mismatches(ours, expected)
    truncated = sum(len(x) + len(y) > 29 for x, y in zip(pieces_a, pieces_b))
    # Hugging Face's own longest_first differs only in the documented class.
    hf_own = _hf(32, a, b)
    hf_differs = _mismatches(hf_own, expected)
    unexplained = [i for i in hf_differs if not _hf_and_google_differ(len(pieces_a[i]), len(pieces_b[i]), 29)]
    explained_class = sum(_hf_and_google_differ(len(x), len(y), 29) for x, y in zip(pieces_a, pieces_b))
    print(
        f"\n{corpus}: pairs @32: {len(a)} pairs ({truncated} truncated), {len(bad)} mismatches vs HF pieces "
        f"+ Google truncation; HF's own longest_first differs on {len(hf_differs)} (all in the odd-budget "
        f"class: {explained_class})"
    )
    assert len(bad) == 0, [(a[i], b[i], ours[i, 0].tolist(), expected[i, 0].tolist()) for i in bad[:3]]
    assert not unexplained and len(hf_differs) == explained_class


def test_hf_longest_first_changes_the_documented_share_of_mr_pairs_at_64():
    """docs/converting.md's figure: how many MR pairs HF's default truncation changes at 64."""
    a, b = references.pairs_of(references.corpus("mr"))
    ours = _ours(64, a, b)
    expected, pieces_a, pieces_b = _google_truncated_hf(64, a, b)
    assert len(_mismatches(ours, expected)) == 0
    hf_differs = _mismatches(_hf(64, a, b), ours)
    assert all(_hf_and_google_differ(len(pieces_a[i]), len(pieces_b[i]), 61) for i in hf_differs)
    truncated = sum(len(x) + len(y) > 61 for x, y in zip(pieces_a, pieces_b))
    share = f"{len(hf_differs)} of the {len(a):,} MR sentence pairs ({100 * len(hf_differs) / len(a):.1f} %"
    print(f"\nmr: pairs @64: {share}) differ from HF's longest_first; {truncated} truncated")
    with open(os.path.join(REPO, "docs", "converting.md"), encoding="utf-8") as f:
        doc = " ".join(f.read().split())
    assert share in doc and f"{truncated} of them truncated" in doc, share


@pytest.mark.parametrize("corpus", CORPORA)
def test_real_pairs_match_hugging_face_at_31(corpus):
    a, b = references.pairs_of(references.corpus(corpus))
    ours, hf = _ours(31, a, b), _hf(31, a, b)
    bad = _mismatches(ours, hf)
    truncated = int((hf[:, 2].sum(1) == 31).sum())
    print(
        f"\n{corpus}: pairs @31 (even budget): {len(a)} pairs ({truncated} filling all 31), "
        f"{len(bad)} mismatches vs HF"
    )
    assert len(bad) == 0, [(a[i], b[i], ours[i, 0].tolist(), hf[i, 0].tolist()) for i in bad[:3]]


def test_hf_longest_first_vs_google_truncation():
    """On a grid of segment lengths, tokenizers' longest_first equals Google's
    _truncate_seq_pair except in the one documented class."""
    tokenizer = references.fresh_hf_tokenizer()
    differ = 0
    for len_a, len_b, length in itertools.product(range(0, 12), range(0, 12), range(3, 20)):
        tokenizer.enable_truncation(length, strategy="longest_first")
        enc = tokenizer.encode(" ".join(["a"] * len_a), " ".join(["b"] * len_b))
        hf = (enc.type_ids.count(0) - 2, enc.type_ids.count(1) - 1)
        google = tuple(map(len, references.google_truncate_pair([0] * len_a, [0] * len_b, length - 3)))
        assert (hf != google) == _hf_and_google_differ(len_a, len_b, length - 3), (
            len_a,
            len_b,
            length,
            hf,
            google,
        )
        differ += hf != google
    assert differ > 0


def test_sample_against_google_tokenization():
    """The first 2,000 sentences also equal Google's own tokenization.py (wordpieces)."""
    sentences = references.corpus("mr")[:2000]
    pre = BertPreprocessor(references.VOCAB, sequence_length=None)
    ours = pre.tokenize(tf.constant(sentences)).to_list()
    bad = [s for s, o in zip(sentences, ours) if o != references.google_pieces(s)]
    assert not bad, bad[:3]
