"""Every Unicode codepoint: our normalizer table, UTF-8 acceptance, and ids vs Hugging Face.

Each codepoint c is tokenized inside a word and alone ("ab{c}cd {c}"), which
shows whether it is deleted, turned into a space, folded, split off as
punctuation/CJK, or kept inside the word. Our ids must equal Hugging Face's
fast BertTokenizer except for
- private-use characters (Co) and U+2B820..U+2B91F: deliberate, see
  bert_preprocessor.py's module docstring;
- the 539 codepoints pinned in tests/fixtures/tokenization_unicode_skew.json:
  Unicode version skew between tokenizers' category tables and ours.
The whole range (1.1M codepoints) is slow (~30-40 s, mostly Hugging Face);
the Basic Multilingual Plane runs in the quick loop.
"""

import json
import os
import unicodedata

import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.tokenization.bert_normalizer import bert_normalizer_model, normalize_char
from keras_bert_impl.tokenization.bert_preprocessor import _checked_utf8
from tests.conftest import REPO
from tests.tokenization import references

SKEW = os.path.join(REPO, "tests", "fixtures", "tokenization_unicode_skew.json")
CJK_RANGE_TYPO = range(0x2B820, 0x2B920)  # tokenizers' is_chinese_char starts this block at 0x2B920
CHUNK = 65536


def _codepoints(limit):
    return [cp for cp in range(limit) if not 0xD800 <= cp <= 0xDFFF]


@pytest.mark.parametrize("lowercase", [True, False])
def test_normalizer_model_is_the_table_on_every_codepoint(lowercase):
    """The Darts-clone trie we compile gives `normalize_char` for all 1,112,064 codepoints."""
    cps = _codepoints(0x110000)
    normalizer = tf_text.FastBertNormalizer(model_buffer=bert_normalizer_model(lowercase))
    got = []
    for i in range(0, len(cps), 4 * CHUNK):
        got.extend(
            normalizer.normalize(tf.constant([chr(cp).encode() for cp in cps[i : i + 4 * CHUNK]])).numpy()
        )
    wrong = [cp for cp, g in zip(cps, got) if g.decode("utf-8") != normalize_char(chr(cp), lowercase)]
    assert not wrong, [(hex(cp), normalize_char(chr(cp), lowercase)) for cp in wrong[:10]]


def test_every_codepoint_is_valid_utf8():
    strings = tf.constant([chr(cp).encode() for cp in _codepoints(0x110000)])
    assert _checked_utf8(strings).shape == strings.shape  # raises on any string it takes for invalid


def _expected_differences():
    with open(SKEW, encoding="utf-8") as f:
        return {int(row[0][2:], 16) for row in json.load(f)["codepoints"]}


@pytest.mark.parametrize(
    "limit", [0x10000, pytest.param(0x110000, marks=pytest.mark.slow)], ids=["bmp", "all"]
)
def test_every_codepoint_matches_hugging_face_except_documented(limit):
    cps = _codepoints(limit)
    texts = [f"ab{chr(cp)}cd {chr(cp)}" for cp in cps]
    pre = BertPreprocessor(references.VOCAB)
    tokenize = tf.function(pre.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    ours = []
    for i in range(0, len(texts), CHUNK):
        ours.extend(tokenize(tf.constant(texts[i : i + CHUNK])).to_list())
    hf = references.hf_pieces(texts)
    differ = {cp for cp, o, h in zip(cps, ours, hf) if o != h}
    private_use = {cp for cp in differ if unicodedata.category(chr(cp)) == "Co"}
    cjk = differ & set(CJK_RANGE_TYPO)
    skew = differ - private_use - cjk
    expected_skew = {cp for cp in _expected_differences() if cp < limit}
    print(
        f"\n{len(cps)} codepoints: {len(differ)} differ from Hugging Face = {len(private_use)} private use "
        f"+ {len(cjk)} U+2B820..U+2B91F + {len(skew)} Unicode version skew (pinned {len(expected_skew)})"
    )
    assert skew == expected_skew, {
        "new differences": sorted(hex(cp) for cp in skew - expected_skew)[:20],
        "no longer different": sorted(hex(cp) for cp in expected_skew - skew)[:20],
    }
    # Every private-use character differs (Hugging Face deletes them
    # all); so does every codepoint of the CJK block.
    assert private_use == {cp for cp in cps if unicodedata.category(chr(cp)) == "Co"}
    assert cjk == {cp for cp in CJK_RANGE_TYPO if cp < limit}
