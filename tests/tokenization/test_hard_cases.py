"""BertPreprocessor on the hard cases of tests/fixtures/tokenization_hard_cases.json.

`expect: hf` cases must give exactly the ids, segment ids and padding mask of
Hugging Face's fast BertTokenizer. `expect: google` cases are the deliberate
differences (their reasons are in the fixture and in bert_preprocessor.py's
module docstring): they must give Google's `tokenization.py` ids packed with
`_truncate_seq_pair`, and Hugging Face must still differ, so that the list
never outlives its reasons.
"""

import json
import os

import tensorflow as tf

from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.tokenization.vocabulary import SPECIAL_TOKENS
from tests.conftest import REPO
from tests.data_readers.google_reference import google_tokenization
from tests.tokenization import references

FIXTURE = os.path.join(REPO, "tests", "fixtures", "tokenization_hard_cases.json")
DEFAULT_LENGTH = 32

with open(FIXTURE, encoding="utf-8") as f:
    CASES = json.load(f)["cases"]


def test_fixture_has_the_required_coverage():
    assert len(CASES) >= 50
    assert all(c["expect"] in ("hf", "google") for c in CASES)
    assert all(bool(c.get("reason")) == (c["expect"] == "google") for c in CASES)
    texts = [c["text"] + c.get("text_b", "") for c in CASES]
    for needed in (
        "\x00",
        "\x07",
        "\u200b",
        "\ufeff",
        "\t",
        "\r",
        "\n",
        "\u200d",
        "\u0301",
        "É",
        "`",
        "\\",
        "|",
        "~",
    ):
        assert any(needed in t for t in texts), f"no hard case holds {needed!r}"
    assert any(len(max(t.split(" "), key=len)) > 100 for t in texts)
    assert any(34 <= len(w) <= 100 and len(w.encode()) > 100 for t in texts for w in t.split(" "))


def _ours_all(cases):
    """Our (token_ids, segment_ids, padding_mask) per case, one batch per (length, single/pair)."""
    results = {}
    groups = {}
    for case in cases:
        groups.setdefault((case.get("sequence_length", DEFAULT_LENGTH), "text_b" in case), []).append(case)
    for (length, is_pair), group in groups.items():
        pre = BertPreprocessor(references.VOCAB, sequence_length=length)
        if is_pair:
            out = pre((tf.constant([c["text"] for c in group]), tf.constant([c["text_b"] for c in group])))
        else:
            out = pre(tf.constant([c["text"] for c in group]))
        arrays = [out[k].numpy().tolist() for k in ("token_ids", "segment_ids", "padding_mask")]
        for i, case in enumerate(group):
            results[case["name"]] = tuple(a[i] for a in arrays)
    return results


def _hf(case):
    tokenizer = references.hf_tokenizer(case.get("sequence_length", DEFAULT_LENGTH))
    enc = (
        tokenizer.encode(case["text"], case["text_b"]) if "text_b" in case else tokenizer.encode(case["text"])
    )
    return enc.ids, enc.type_ids, enc.attention_mask


def _google(case):
    length = case.get("sequence_length", DEFAULT_LENGTH)
    a = references.google_pieces(case["text"])
    if "text_b" in case:
        a, b = references.google_truncate_pair(a, references.google_pieces(case["text_b"]), length - 3)
        return references.pack(a, b, length)
    return references.pack(a[: length - 2], None, length)


def test_hard_cases_match_hugging_face():
    cases = [c for c in CASES if c["expect"] == "hf"]
    ours = _ours_all(cases)
    failures = []
    for case in cases:
        hf = tuple(list(x) for x in _hf(case))
        if ours[case["name"]] != hf:
            failures.append(f"{case['name']}: ours {ours[case['name']][0]} vs Hugging Face {hf[0]}")
    print(f"hard cases vs Hugging Face: {len(cases)} cases, {len(failures)} mismatches")
    assert not failures, "\n".join(failures)


def test_deliberate_differences_match_google():
    cases = [c for c in CASES if c["expect"] == "google"]
    ours = _ours_all(cases)
    failures = []
    for case in cases:
        google = tuple(list(x) for x in _google(case))
        hf = tuple(list(x) for x in _hf(case))
        if ours[case["name"]] != google:
            failures.append(f"{case['name']}: ours {ours[case['name']][0]} vs Google {google[0]}")
        if ours[case["name"]] == hf:
            failures.append(
                f"{case['name']} is listed as a deliberate difference but Hugging Face now agrees: drop it"
            )
    print(f"deliberate differences: {len(cases)} cases, {len(failures)} failures")
    assert not failures, "\n".join(failures)


def test_word_length_limit_counts_characters_not_bytes():
    """tf-text's own limit counts UTF-8 bytes (100 by default): 60 Cyrillic letters
    (120 bytes) would be [UNK] there but are a word for Google and Hugging Face."""
    pre = BertPreprocessor(references.VOCAB, sequence_length=None)
    ids = pre.tokenize(tf.constant(["я" * 60, "я" * 101, "a" * 100, "a" * 101])).to_list()
    assert ids[0] != [pre.unk_id] and len(ids[0]) > 1
    assert ids[1] == [pre.unk_id]
    assert ids[2] != [pre.unk_id] and ids[3] == [pre.unk_id]
    short = BertPreprocessor(references.VOCAB, max_chars_per_word=5)
    five, six = short.tokenize(tf.constant(["abcde", "abcdef"])).to_list()
    assert len(five) > 1 and six == [short.unk_id]


def test_cased_vocabulary_matches_hugging_face_cased_normalizer():
    """lowercase=False: only BERT's text cleaning (no lower-casing, no accent
    stripping), as tokenizers' BertNormalizer(lowercase=False, strip_accents=False)."""
    from tokenizers import Tokenizer, normalizers

    hf = Tokenizer.from_str(references.fresh_hf_tokenizer(DEFAULT_LENGTH).to_str())
    hf.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False
    )
    cases = [c for c in CASES if c["expect"] == "hf" and "text_b" not in c and "sequence_length" not in c]
    texts = [c["text"] for c in cases] + ["The Quick Brown Fox, Éclair and ÇA", "ab\x07cd\u200bef \x00 NUL"]
    pre = BertPreprocessor(references.VOCAB, lowercase=False, sequence_length=DEFAULT_LENGTH)
    ours = pre(tf.constant(texts))["token_ids"].numpy().tolist()
    expected = [e.ids for e in hf.encode_batch(texts)]
    failures = [(t, o, e) for t, o, e in zip(texts, ours, expected) if o != e]
    assert not failures, failures[:3]


def test_line_and_paragraph_separators_end_a_word_whatever_the_vocabulary(tmp_path):
    """U+2028/U+2029 end a word for Google (`str.split()`) and Hugging Face (`char::is_whitespace`).
    With a vocabulary holding "good\u2028really" (as `kbert vocab` used to learn), our WordPiece
    matched that token across the separator; now every tokenizer gives "good", "really"."""
    from tokenizers import BertWordPieceTokenizer

    tokens = list(SPECIAL_TOKENS) + [
        "a",
        "good",
        "really",
        "plot",
        "twist",
        "good\u2028really",
        "plot\u2029twist",
    ]
    path = tmp_path / "vocab.txt"
    path.write_text("".join(token + "\n" for token in tokens), encoding="utf-8")
    google = google_tokenization().FullTokenizer(vocab_file=str(path), do_lower_case=True)
    hf = BertWordPieceTokenizer({token: i for i, token in enumerate(tokens)}, lowercase=True)
    texts = ["a good\u2028really plot\u2029twist", "good\u2028really", "\u2028plot\u2029\u2029twist\u2028"]
    ours = (
        BertPreprocessor(tokens, lowercase=True, sequence_length=None).tokenize(tf.constant(texts)).to_list()
    )
    assert google.vocab == {token: i for i, token in enumerate(tokens)}  # read as we read it
    expected = [google.convert_tokens_to_ids(google.tokenize(t)) for t in texts]
    assert expected == [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    assert ours == expected == [[5, 6, 7, 8, 9], [6, 7], [8, 9]]
