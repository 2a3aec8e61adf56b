"""BertPreprocessor: packing, Google's pair truncation, and saving."""

import itertools
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.tokenization.bert_preprocessor import truncate_pair_lengths
from tests.harness import run_preprocessor_test


def google_truncate_seq_pair(len_a, len_b, max_length):
    """The loop of Google's run_classifier._truncate_seq_pair, on lengths."""
    while len_a + len_b > max_length:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def test_pair_truncation_matches_google_loop():
    cases = list(itertools.product(range(0, 14), range(0, 14), range(0, 12)))
    a, b, m = (np.array(c) for c in zip(*cases))
    keep_a, keep_b = truncate_pair_lengths(tf.constant(a), tf.constant(b), tf.constant(m))
    expected = np.array([google_truncate_seq_pair(*c) for c in cases])
    np.testing.assert_array_equal(np.stack([keep_a.numpy(), keep_b.numpy()], 1), expected)


@pytest.fixture(scope="module")
def preprocessor():
    from tests.conftest import DATA

    return BertPreprocessor(os.path.join(DATA, "minilm", "vocab.txt"), sequence_length=12)


def test_single_and_pair_packing(preprocessor):
    out = preprocessor(tf.constant(["The quick brown fox jumps over the lazy dog.", "hi"]))
    ids = out["token_ids"].numpy()
    assert ids[0].tolist() == [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1012, 102]
    assert ids[1, :3].tolist() == [101, 7632, 102] and (ids[1, 3:] == 0).all()
    assert out["padding_mask"].numpy()[1].tolist() == [1, 1, 1] + [0] * 9
    pair = preprocessor((tf.constant(["a b c d e f g h i j"]), tf.constant(["k l m"])))
    # budget 9 = 12 - 3: A keeps 6, B keeps 3, as Google's loop does.
    assert pair["token_ids"].numpy()[0].tolist() == [
        101,
        1037,
        1038,
        1039,
        1040,
        1041,
        1042,
        102,
        1047,
        1048,
        1049,
        102,
    ]
    assert pair["segment_ids"].numpy()[0].tolist() == [0] * 8 + [1] * 4


@pytest.mark.slow  # about 20 s or more: tokenizes a corpus three ways through tf.data
def test_same_ids_through_tf_data_batched_and_unbatched(preprocessor):
    texts = ["The quick brown fox jumps over the lazy dog.", "hi", "Über café naïve", ""]
    single = run_preprocessor_test(preprocessor, texts)
    assert single["token_ids"].shape == (4, 12)
    pair = run_preprocessor_test(preprocessor, (texts, ["a b c d e f g h i j", "k", "", "l m"]))
    assert pair["segment_ids"].numpy()[1].tolist() == [0, 0, 0, 1, 1] + [0] * 7


def test_detokenize(preprocessor):
    ids = preprocessor(tf.constant(["Hello, World!"]))["token_ids"]
    assert preprocessor.detokenize(ids).numpy().tolist() == [b"hello , world !"]
    # tokenize()'s own ragged ids (they raised: convert_to_tensor ran before the ragged branch).
    texts = tf.constant(["Hello, World!", "a gripping film"])
    assert preprocessor.detokenize(preprocessor.tokenize(texts)).numpy().tolist() == [
        b"hello , world !",
        b"a gripping film",
    ]


def test_saved_with_vocabulary(preprocessor, tmp_path):
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, preprocessor(inputs))
    model.save(tmp_path / "p.keras")
    again = keras.saving.load_model(tmp_path / "p.keras")
    x = tf.constant(["Über café naïve"])
    assert again(x)["token_ids"].numpy().tolist() == model(x)["token_ids"].numpy().tolist()


def test_bad_vocabulary(tmp_path):
    with pytest.raises(ValueError, match="lacks BERT's special tokens \\['\\[MASK\\]'\\]"):
        BertPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
    with pytest.raises(ValueError, match="duplicate entries \\['a'\\]"):
        BertPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"])
    with pytest.raises(ValueError, match="sequence_length must be an int >= 3"):
        BertPreprocessor(["[PAD]"], sequence_length=2)
    # A vocab.txt that is not UTF-8, or a folder: said naming the file, the line and the fix
    # (they were "'utf-8' codec can't decode byte 0xe9 in position 31" and "[Errno 21]").
    latin1 = tmp_path / "vocab.txt"
    latin1.write_bytes(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncaf\xe9\n")
    with pytest.raises(
        ValueError, match=rf"{latin1} is not UTF-8 \(line 6: byte 0xe9\): .* Re-save it as UTF-8"
    ):
        BertPreprocessor(str(latin1))
    with pytest.raises(IsADirectoryError, match=rf"{tmp_path} is a folder: give the path of its vocab.txt"):
        BertPreprocessor(str(tmp_path))


def test_max_chars_per_word_round_trips_and_is_checked():
    from tests.conftest import DATA

    pre = BertPreprocessor(
        os.path.join(DATA, "minilm", "vocab.txt"), sequence_length=8, max_chars_per_word=200
    )
    config = pre.get_config()
    assert config["max_chars_per_word"] == 200 and config["lowercase"] is True
    again = BertPreprocessor.from_config(config)
    assert again.max_chars_per_word == 200 and again.sequence_length == 8
    with pytest.raises(
        ValueError, match="max_chars_per_word must be a positive integer. Received: max_chars_per_word=0"
    ):
        BertPreprocessor(max_chars_per_word=0)
