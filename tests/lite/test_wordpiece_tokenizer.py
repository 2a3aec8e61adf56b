"""keras_bert_lite's plain-Python WordPieceTokenizer against BertPreprocessor (tensorflow-text in
the graph), id for id: every hard case of tests/fixtures/tokenization_hard_cases.json, the 4,000
MR sentences and pairs of them at short lengths, and a codepoint sample of every plane. Also: the
package's character table is the Android asset's, and the package imports neither TensorFlow nor
Keras."""

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.tokenization.vocabulary import read_vocabulary
from keras_bert_lite import WordPieceTokenizer
from keras_bert_lite.char_table import PATH as LITE_TABLE
from tests.conftest import DATA, REPO
from tests.export.edge_reference import BAD_INPUT, CHAR_TABLE, HARD_CASES, codepoint_ids, codepoint_sample
from tests.tokenization.references import corpus, pairs_of

VOCABULARY = os.path.join(DATA, "minilm", "vocab.txt")


@pytest.fixture(scope="module")
def tokenizer():
    return WordPieceTokenizer(read_vocabulary(VOCABULARY), lowercase=True)


@functools.cache
def _preprocessor(sequence_length):
    return BertPreprocessor(VOCABULARY, sequence_length=sequence_length)


def _preprocessor_ids(texts, sequence_length, texts_b=None):
    x = _preprocessor(sequence_length)((list(texts), list(texts_b)) if texts_b is not None else list(texts))
    return {k: x[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")}


def _assert_same(got, want):
    for name in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_the_character_table_is_the_edge_demos():
    """One table for every tokenizer outside TensorFlow: test_android_logic regenerates the asset."""
    with open(LITE_TABLE, "rb") as lite, open(CHAR_TABLE, "rb") as android:
        assert lite.read() == android.read(), (
            "export/keras_bert_lite/bert_unicode.txt differs from the Android asset: copy "
            "android_demo/app/src/main/assets/bert_unicode.txt over it."
        )


def test_every_hard_case(tokenizer):
    with open(HARD_CASES, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    assert len(cases) >= 50
    for case in cases:
        texts_b = [case["text_b"]] if "text_b" in case else None
        length = case.get("sequence_length", 32)
        want = _preprocessor_ids([case["text"]], length, texts_b)
        got = tokenizer.encode([case["text"]], texts_b, length)
        for name in ("token_ids", "segment_ids", "padding_mask"):
            assert got[name].tolist() == want[name].tolist(), (case["name"], name)


def test_the_mr_sentences_and_the_bad_input(tokenizer):
    texts = corpus("mr") + list(BAD_INPUT.values())
    assert len(texts) > 4000
    _assert_same(tokenizer.encode(texts, sequence_length=64), _preprocessor_ids(texts, 64))
    # Unpadded, every row at its own length: the packing LiteTextClassifier runs.
    for text, ids in zip(texts[:500], _preprocessor_ids(texts[:500], 128)["token_ids"]):
        assert tokenizer.pack(text, sequence_length=128)[0] == ids[ids != 0].tolist()


@pytest.mark.parametrize("sequence_length", [9, 16, 33])
def test_pairs_truncate_like_googles_truncate_seq_pair(tokenizer, sequence_length):
    a, b = pairs_of(corpus("mr")[:1000])
    want = _preprocessor_ids(a, sequence_length, b)
    _assert_same(tokenizer.encode(a, b, sequence_length), want)
    assert (want["segment_ids"].sum(axis=1) > 0).all()  # every pair kept a piece of its second text


def test_a_codepoint_sample_of_every_plane(tokenizer):
    """ "ab{c}cd {c}" for every 5th codepoint of codepoint_sample() (every category many times):
    inside a word and alone, which shows whether c is removed, a space, folded, split off or kept."""
    codepoints = codepoint_sample()[::5]
    want = codepoint_ids(VOCABULARY, codepoints)
    got = [tokenizer.tokenize(f"ab{chr(cp)}cd {chr(cp)}") for cp in codepoints]
    bad = [(hex(cp), g, w) for cp, g, w in zip(codepoints, got, want) if g != w]
    assert len(codepoints) > 40_000 and not bad, bad[:10]


def test_bad_arguments_say_what_to_pass(tokenizer):
    with pytest.raises(ValueError, match=r"has no \[CLS\], \[SEP\] token"):
        WordPieceTokenizer(["[PAD]", "[UNK]", "a"], lowercase=True)
    with pytest.raises(ValueError, match="lowercase must be True or False. Received: lowercase='yes'"):
        WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]"], lowercase="yes")
    with pytest.raises(ValueError, match="sequence_length must be an int >= 3.*Received: sequence_length=2"):
        tokenizer.encode(["a"], sequence_length=2)
    with pytest.raises(ValueError, match="WordPieceTokenizer takes str. Received: bytes"):
        tokenizer.tokenize(b"a film")
    with pytest.raises(ValueError, match="lone surrogate"):
        tokenizer.tokenize("caf\udce9")


def test_the_package_imports_neither_tensorflow_nor_keras():
    code = (
        "import sys; import keras_bert_lite as kl; "
        f"t = kl.WordPieceTokenizer(open({VOCABULARY!r}).read().splitlines(), lowercase=True); "
        "heavy = ('tensorflow', 'keras', 'tf_keras'); "
        "print(t.tokenize('A fine film!'), sorted(m for m in heavy if m in sys.modules))"
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "export"))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[1037, 2986, 2143, 999] []", out
