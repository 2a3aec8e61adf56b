"""Property tests: random Unicode text and pairs never crash BertPreprocessor and always pack correctly.

For every row: the configured shape and dtype; [CLS] first; one [SEP] per
segment, at the end of each; [PAD] after; segment ids 0 up to the first [SEP],
1 after it; a padding mask of ones then zeros that marks exactly the packed
tokens; the packed pieces are the untruncated pieces cut by the truncation
rule. And, on text avoiding the documented deliberate differences, the ids of
Hugging Face's fast tokenizer. About 20-40 s in all on the 2-core machine.
"""

import json
import os
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tensorflow as tf

from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.tokenization.bert_preprocessor import truncate_pair_lengths
from keras_bert_impl.tokenization.vocabulary import SPECIAL_TOKENS
from tests.conftest import REPO
from tests.tokenization import references

CLS, SEP, PAD = 101, 102, 0
LENGTHS = [None, 3, 4, 5, 8, 17, 64]
SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)

TEXT = st.text(max_size=40)  # any Unicode scalar value but surrogates, NUL and controls included
TEXTS = st.lists(TEXT, min_size=1, max_size=5)
PAIRS = st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=5)

_PRE = {}


def preprocessor(length):
    if length not in _PRE:
        _PRE[length] = BertPreprocessor(references.VOCAB, sequence_length=length)
    return _PRE[length]


def check_packing(out, pieces, length):
    ids, segments, mask = (out[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask"))
    assert all(out[k].dtype == tf.int32 for k in out)
    n_segments = len(pieces)
    used = mask.sum(1)
    width = length if length is not None else int(used.max())
    assert ids.shape == segments.shape == mask.shape == (len(pieces[0]), width)
    for row in range(ids.shape[0]):
        n = int(used[row])
        assert mask[row].tolist() == [1] * n + [0] * (width - n)
        assert ids[row, 0] == CLS and (ids[row, 1:] != CLS).all()
        assert ids[row, n - 1] == SEP and (ids[row, :n] == SEP).sum() == n_segments
        assert (ids[row, n:] == PAD).all() and (segments[row, n:] == 0).all()
        assert ((ids[row, :n] >= 0) & (ids[row, :n] < 30522)).all()
        first_sep = int(np.flatnonzero(ids[row] == SEP)[0])
        assert (segments[row, : first_sep + 1] == 0).all() and (segments[row, first_sep + 1 : n] == 1).all()
        # The packed pieces are the untruncated ones, truncated by the rule.
        lengths = [len(p[row]) for p in pieces]
        if n_segments == 1:
            keep = [lengths[0] if length is None else min(lengths[0], length - 2)]
        elif length is None:
            keep = lengths
        else:
            keep = [int(k) for k in truncate_pair_lengths(*lengths, length - 3)]
        assert ids[row, 1:first_sep].tolist() == pieces[0][row][: keep[0]]
        if n_segments == 2:
            assert ids[row, first_sep + 1 : n - 1].tolist() == pieces[1][row][: keep[1]]


@pytest.mark.slow  # about 20 s or more: 100 random batches through the eager preprocessor
@SETTINGS
@given(texts=TEXTS, length=st.sampled_from(LENGTHS))
def test_single_sentences_pack_correctly(texts, length):
    pre = preprocessor(length)
    out = pre(tf.constant(texts))
    check_packing(out, [pre.tokenize(tf.constant(texts)).to_list()], length)


@pytest.mark.slow  # about 20 s or more: 100 random batches of pairs through the eager preprocessor
@SETTINGS
@given(pairs=PAIRS, length=st.sampled_from(LENGTHS))
def test_pairs_pack_correctly(pairs, length):
    pre = preprocessor(length)
    a, b = (tf.constant(list(x)) for x in zip(*pairs))
    out = pre((a, b))
    check_packing(out, [pre.tokenize(a).to_list(), pre.tokenize(b).to_list()], length)


def _deliberately_different():
    with open(
        os.path.join(REPO, "tests", "fixtures", "tokenization_unicode_skew.json"), encoding="utf-8"
    ) as f:
        skew = {chr(int(row[0][2:], 16)) for row in json.load(f)["codepoints"]}
    return skew | {chr(cp) for cp in range(0x2B820, 0x2B920)}


_DIFFERENT = _deliberately_different()
COMPARABLE_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Co")).filter(lambda c: c not in _DIFFERENT),
    max_size=40,
)


@pytest.mark.slow  # about 20 s or more: tokenizes thousands of random strings two ways
@SETTINGS
@given(pairs=st.lists(st.tuples(COMPARABLE_TEXT, COMPARABLE_TEXT), min_size=1, max_size=5))
def test_random_text_matches_hugging_face(pairs):
    """Budgets are even (21 and 20), where tokenizers' pair truncation equals Google's."""
    assume(not any(t in a + b for a, b in pairs for t in SPECIAL_TOKENS))
    a, b = (list(x) for x in zip(*pairs))
    single = preprocessor(23)(tf.constant(a))["token_ids"].numpy()
    pair = preprocessor(23)((tf.constant(a), tf.constant(b)))["token_ids"].numpy()
    hf = references.hf_tokenizer(23)
    assert single.tolist() == [e.ids for e in hf.encode_batch(a)]
    assert pair.tolist() == [e.ids for e in hf.encode_batch(list(zip(a, b)))]
    assert all(unicodedata.category(c) != "Co" for t in a + b for c in t)
