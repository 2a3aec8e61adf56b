"""Bad input: invalid UTF-8, NUL bytes, 1 MB strings, wrong dtypes and ranks.

Decision on invalid UTF-8: a clear error. tensorflow-text alone does not
check: its normalizer turns an invalid byte into a space or its word into
[UNK] (test_tf_text_alone_is_silent_on_invalid_utf8), and replacing it with
U+FFFD would not help either, since BERT's text cleaning deletes U+FFFD
("caf\\xe9" would become "caf"). Both reference tokenizers take only valid
text. So BertPreprocessor raises InvalidArgumentError naming the problem and
showing the first bad string; decode the source with its real encoding.
"""

import os
import time
import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.tokenization import BertPreprocessor
from tests.tokenization import references

INVALID = [
    b"caf\xe9 au lait",  # latin-1 byte
    b"trunc \xe2\x82",  # truncated 3-byte sequence
    b"\xc0\xaf overlong slash",  # overlong encoding
    b"\xed\xa0\x80 surrogate",  # UTF-16 surrogate in UTF-8 (CESU-8)
    b"\xf4\x90\x80\x80 above U+10FFFF",
    b"\xff\xfe bom of utf-16",
    b"lone continuation \x80 byte",
]


@pytest.fixture(scope="module")
def pre():
    return BertPreprocessor(references.VOCAB, sequence_length=128)


@pytest.mark.parametrize("bad", INVALID, ids=lambda b: b.decode("latin-1")[:12])
def test_invalid_utf8_raises_a_clear_error(pre, bad):
    batch = tf.constant([b"fine text", bad, "fine too".encode()])
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8") as info:
        pre(batch)
    message = str(info.value)
    assert f"First invalid row of the batch: 1, {bad.decode('utf-8', errors='replace')!r}" in message


def test_invalid_utf8_raises_in_graph_pairs_and_tf_data(pre):
    fn = tf.function(lambda a, b: pre((a, b)))
    # In a graph the message comes from tf.debugging.Assert: "...batch:] [0] [caf\ufffd au lait]".
    graph_message = (
        "not valid UTF-8(.|\\n)*First invalid row of the batch:\\] \\[0\\] \\[caf\ufffd au lait\\]"
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=graph_message):
        fn(tf.constant(["ok"]), tf.constant([INVALID[0]]))
    ds = tf.data.Dataset.from_tensor_slices([b"ok", INVALID[1]]).batch(2).map(pre)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8"):
        list(ds)


def test_tf_text_alone_is_silent_on_invalid_utf8():
    """Why we check: without it the ids would be quietly wrong."""
    vocab = references.VOCAB
    fast = tf_text.FastBertTokenizer(
        vocab=[t.rstrip("\n") for t in open(vocab, encoding="utf-8")],
        token_out_type=tf.int32,
        lower_case_nfd_strip_accents=True,
    )
    assert fast.tokenize(tf.constant([INVALID[0]])).to_list()[0][0] == 100  # "caf\xe9" -> [UNK], no error


def test_valid_text_around_invalid_check(pre):
    """U+FFFD, noncharacters and NUL are valid UTF-8: no error, and the ids of Hugging Face."""
    texts = ["a\ufffdb", "x\uffffy \ufdd0", "nul\x00inside \x00", "\x00", "\U0001f600\U000e0001 end"]
    out = pre(tf.constant([t.encode("utf-8") for t in texts]))["token_ids"].numpy()
    hf = np.array([e.ids for e in references.hf_tokenizer(128).encode_batch(texts)])
    np.testing.assert_array_equal(out, hf)
    assert out[3, :3].tolist() == [101, 102, 0]
    # The last private-use codepoint is valid too ([UNK], as Google; a deliberate difference from HF).
    assert pre.tokenize(tf.constant(["\U0010fffd end"])).to_list() == [
        references.google_pieces("\U0010fffd end")
    ]


def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def test_one_megabyte_strings(pre):
    words = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 20000)[: 1 << 20]
    one_word = "a" * (1 << 20)
    cjk = "中文" * ((1 << 20) // 6)
    texts = [words, one_word, cjk]
    assert all(len(t.encode()) >= (1 << 20) - 6 for t in texts)
    out, seconds = _timed(lambda: pre(tf.constant(texts)))
    ids = out["token_ids"].numpy()
    hf = np.array([e.ids for e in references.hf_tokenizer(128).encode_batch(texts)])
    np.testing.assert_array_equal(ids, hf)
    assert ids[1, :4].tolist() == [101, 100, 102, 0]  # one 1 MB word: [UNK]
    assert out["padding_mask"].numpy()[[0, 2]].sum() == 2 * 128
    assert seconds < 30, f"3 MB took {seconds:.1f} s"


def test_wrong_dtype_or_rank(pre):
    with pytest.raises(ValueError, match="batch of strings of shape \\[B\\].*dtype=int32"):
        pre(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="shape=\\(1, 2\\)"):
        pre(tf.constant([["a", "b"]]))
    with pytest.raises(ValueError, match="one or two segments"):
        pre((tf.constant(["a"]), tf.constant(["b"]), tf.constant(["c"])))
    assert pre("one plain string")["token_ids"].shape == (1, 128)


def test_casing_mismatch_warns():
    from tests.conftest import DATA

    uncased = os.path.join(DATA, "minilm", "vocab.txt")
    with pytest.warns(UserWarning, match="no upper-case tokens but lowercase=False"):
        BertPreprocessor(uncased, lowercase=False)
    cased = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "The", "the", "Paris"]
    with pytest.warns(
        UserWarning, match="upper-case tokens \\(e.g. \\['The', 'Paris'\\]\\) but lowercase=True"
    ):
        BertPreprocessor(cased, lowercase=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BertPreprocessor(uncased)  # follows the vocabulary: no warning
        BertPreprocessor(cased)
