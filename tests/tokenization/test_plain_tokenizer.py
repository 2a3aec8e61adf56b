"""`BertPreprocessor.plain_tokenizer()` (keras_bert_lite's WordPieceTokenizer: plain Python, what
`TextPredictor` tokenizes small calls with) gives exactly BertPreprocessor's `token_ids`,
`segment_ids` and `padding_mask`, and those of Hugging Face's `tokenizers` (Rust), on MiniLM's real
vocabulary: every MR sentence of data/corpora/polarity-en-pang&lee2.csv (its 4,000 rows) singly at
128 and paired at 32 and 31, every hard case of tests/fixtures/tokenization_hard_cases.json
(accents, CJK, control characters, emoji, words of 100 to 1,000 characters, empty text, pairs over
the length; the `google` cases against Google's `tokenization.py`), and a cased vocabulary (MiniLM's
plus capitalised and upper-case words) on the MR sentences title-cased, against Hugging Face's
BertWordPieceTokenizer with lowercase=False. Pair truncation: at 32 (odd budget) Hugging Face's
untruncated pieces cut by Google's `_truncate_seq_pair`, at 31 (even) its own `longest_first`
(tests/tokenization/test_reference_parity.py says why).
"""

import functools

import numpy as np
import pytest

from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.tokenization.vocabulary import read_vocabulary
from tests.tokenization import references
from tests.tokenization.test_hard_cases import CASES, DEFAULT_LENGTH, _google, _hf, _ours_all

KEYS = ("token_ids", "segment_ids", "padding_mask")


@functools.cache
def _preprocessor(sequence_length, cased=False):
    return BertPreprocessor(
        _cased_vocabulary() if cased else references.VOCAB, sequence_length=sequence_length
    )


@functools.cache
def _cased_vocabulary():
    """MiniLM's tokens, then the capitalised and upper-case form of each alphabetic word that is not
    there yet: a vocabulary BertPreprocessor reads as cased (lowercase=None -> False)."""
    tokens = read_vocabulary(references.VOCAB)
    seen = set(tokens)
    extra = []
    for token in tokens:
        if token.isalpha():
            for form in (token.capitalize(), token.upper()):
                if form not in seen:
                    seen.add(form)
                    extra.append(form)
    return tokens + extra


@pytest.fixture(scope="module")
def plain():
    return _preprocessor(128).plain_tokenizer()


@pytest.fixture(scope="module")
def mr():
    sentences = references.corpus("mr")
    assert len(sentences) == len(references._csv_texts(references.SENTENCES)) == 4000
    return sentences


def _preprocessor_ids(sequence_length, texts, texts_b=None, cased=False):
    x = _preprocessor(sequence_length, cased)(texts if texts_b is None else (texts, texts_b))
    return {k: x[k].numpy() for k in KEYS}


def _hf_ids(tokenizer, texts, texts_b=None):
    encodings = tokenizer.encode_batch(list(texts) if texts_b is None else list(zip(texts, texts_b)))
    return {
        "token_ids": np.array([e.ids for e in encodings]),
        "segment_ids": np.array([e.type_ids for e in encodings]),
        "padding_mask": np.array([e.attention_mask for e in encodings]),
    }


def _assert_same(got, want, what):
    for key in KEYS:
        bad = np.flatnonzero((np.asarray(got[key]) != np.asarray(want[key])).any(axis=1))
        assert got[key].shape == want[key].shape and not bad.size, (what, key, bad[:10].tolist())


def test_the_mr_sentences_match_bert_preprocessor_and_hugging_face(plain, mr):
    got = plain.encode(mr, sequence_length=128)
    assert got["padding_mask"].sum() > 4000 * 20  # real sentences, ~27 pieces each
    _assert_same(got, _preprocessor_ids(128, mr), "BertPreprocessor")
    _assert_same(got, _hf_ids(references.hf_tokenizer(128), mr), "Hugging Face")


def test_mr_pairs_truncate_like_bert_preprocessor_and_the_references(plain, mr):
    a, b = references.pairs_of(mr)
    # 32: budget 29 (odd), Hugging Face's pieces cut by Google's rule (our rule for pairs).
    got = plain.encode(a, b, 32)
    _assert_same(got, _preprocessor_ids(32, a, b), "BertPreprocessor at 32")
    packed = [
        references.pack(*references.google_truncate_pair(pa, pb, 29), 32)
        for pa, pb in zip(references.hf_pieces(a), references.hf_pieces(b))
    ]
    google = {key: np.array([row[i] for row in packed]) for i, key in enumerate(KEYS)}
    _assert_same(got, google, "Hugging Face's pieces, Google's truncation, at 32")
    assert (got["padding_mask"].sum(axis=1) == 32).mean() > 0.5  # most pairs were truncated
    # 31: budget 28 (even), where Hugging Face's longest_first is Google's rule.
    got = plain.encode(a, b, 31)
    _assert_same(got, _preprocessor_ids(31, a, b), "BertPreprocessor at 31")
    _assert_same(got, _hf_ids(references.hf_tokenizer(31), a, b), "Hugging Face at 31")


def test_every_hard_case(plain):
    """Each case at its length against BertPreprocessor, and against Hugging Face (`hf` cases) or
    Google's tokenization.py (`google` cases, the deliberate differences)."""
    ours = _ours_all(CASES)
    failures = []
    for case in CASES:
        length = case.get("sequence_length", DEFAULT_LENGTH)
        texts_b = [case["text_b"]] if "text_b" in case else None
        got = plain.encode([case["text"]], texts_b, length)
        got = tuple(got[k][0].tolist() for k in KEYS)
        reference = _hf(case) if case["expect"] == "hf" else _google(case)
        for name, want in (("BertPreprocessor", ours[case["name"]]), ("reference", reference)):
            if got != tuple(list(x) for x in want):
                failures.append((case["name"], name, got[0], list(want[0])))
    assert len(CASES) >= 90 and not failures, failures[:5]


def test_a_cased_vocabulary_matches_bert_preprocessor_and_hugging_face(mr):
    from tokenizers import BertWordPieceTokenizer

    vocabulary = _cased_vocabulary()
    preprocessor = _preprocessor(64, cased=True)
    plain = preprocessor.plain_tokenizer()
    assert preprocessor.lowercase is False and plain.lowercase is False
    hf = BertWordPieceTokenizer(
        {token: i for i, token in enumerate(vocabulary)},
        clean_text=True,
        handle_chinese_chars=True,
        strip_accents=False,
        lowercase=False,
    )
    hf.enable_truncation(64)
    hf.enable_padding(length=64, pad_id=0, pad_type_id=0, pad_token="[PAD]")
    singles = [c["text"] for c in CASES if c["expect"] == "hf" and "text_b" not in c]
    texts = (
        [s.title() for s in mr]
        + singles
        + ["The Quick Brown FOX, Éclair and ÇA", "ab\x07cd\u200bEF \x00 NUL"]
    )
    got = plain.encode(texts, sequence_length=64)
    # The cased tokens are used: lower-casing (or an uncased table) would lose them.
    assert (got["token_ids"] >= len(read_vocabulary(references.VOCAB))).any(axis=1).mean() > 0.9
    _assert_same(got, _preprocessor_ids(64, texts, cased=True), "BertPreprocessor, cased")
    _assert_same(got, _hf_ids(hf, texts), "Hugging Face, cased")


def test_the_layers_settings_carry_over():
    """The word limit, per-batch padding, a casing that disagrees with the vocabulary."""
    texts = ["abcde abcdef", "Fine FILMS", "a"]
    preprocessors = [
        BertPreprocessor(references.VOCAB, max_chars_per_word=5),
        BertPreprocessor(references.VOCAB, sequence_length=None),
    ]
    with pytest.warns(UserWarning, match="disagree"):
        preprocessors.append(BertPreprocessor(references.VOCAB, lowercase=False))
    for preprocessor in preprocessors:
        got = preprocessor.plain_tokenizer().encode(texts, sequence_length=preprocessor.sequence_length)
        want = {k: v.numpy() for k, v in preprocessor(texts).items()}
        _assert_same(got, want, preprocessor.get_config())
    assert got["token_ids"][1].tolist()[:3] == [101, 100, 100]  # cased: "Fine", "FILMS" are [UNK]
    with pytest.raises(ValueError, match="BertPreprocessor has no vocabulary"):
        BertPreprocessor().plain_tokenizer()
