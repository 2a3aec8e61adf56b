"""PretrainingMasker on the full movie reviews: Google's masking, static and dynamic."""

import random

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.data import PretrainingMasker
from keras_bert_impl.tokenization.vocabulary import load_vocabulary
from tests.data.helpers import CLS, MASK, PAD, SEP, num_to_predict, original_ids, replacement_split, words


def test_special_ids(vocab_path):
    vocab = load_vocabulary(vocab_path)
    assert [vocab[i] for i in (PAD, CLS, SEP, MASK)] == ["[PAD]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(vocab) == 30522


def _static_rows(instances):
    return [(i.token_ids, i.masked_lm_positions, i.masked_lm_ids) for i in instances]


def test_static_masking_statistics_on_reviews(review_instances):
    lengths = np.array([len(i.token_ids) for i in review_instances])
    masked = np.array([len(i.masked_lm_positions) for i in review_instances])
    assert lengths.sum() >= 100_000 and len(review_instances) > 10_000
    # Google's count, instance by instance: min(20, max(1, round(0.15 * len(tokens)))).
    assert masked.tolist() == [num_to_predict(n) for n in lengths]
    # 15% +/- 0.5 point, over all tokens (Google's denominator, [CLS]/[SEP] included)
    # and over the maskable tokens alone.
    fraction_all = masked.sum() / lengths.sum()
    fraction_maskable = masked.sum() / (lengths.sum() - 3 * len(lengths))
    assert abs(fraction_all - 0.15) <= 0.005, fraction_all
    assert abs(fraction_maskable - 0.15) <= 0.005, fraction_maskable
    mask, same, other = replacement_split(_static_rows(review_instances))
    assert abs(mask - 0.8) <= 0.01 and abs(same - 0.1) <= 0.01 and abs(other - 0.1) <= 0.01, (
        mask,
        same,
        other,
    )


def test_static_masking_never_touches_special_tokens(review_instances):
    for instance in review_instances:
        ids = instance.token_ids
        assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) == 2 and ids.count(CLS) == 1
        assert PAD not in ids
        assert not {ids[p] for p in instance.masked_lm_positions} & {CLS, SEP, PAD}
        assert not set(instance.masked_lm_ids) & {CLS, SEP, PAD}
        assert instance.masked_lm_positions == sorted(set(instance.masked_lm_positions))


def test_static_masking_matches_google_code(review_instances, vocab_path):
    """Google's create_masked_lm_predictions (bert-tensorflow 1.0.4) and ours,
    on 500 real packed sequences, with the same random.Random: same output."""
    from bert import create_pretraining_data as google

    vocab = load_vocabulary(vocab_path)
    masker = PretrainingMasker(vocab)
    for k, instance in enumerate(review_instances[:500]):
        ids = original_ids(instance)
        tokens, positions, labels = google.create_masked_lm_predictions(
            [vocab[i] for i in ids], 0.15, 20, vocab, random.Random(k)
        )
        output, our_positions, our_labels = masker.mask_ids(ids, random.Random(k))
        assert [vocab[i] for i in output] == tokens
        assert our_positions == positions
        assert [vocab[i] for i in our_labels] == labels


def test_whole_word_masking_never_splits_a_word(wwm_instances, vocab_path):
    continuation = PretrainingMasker(vocab_path).is_continuation
    multi_piece_masked = 0
    lengths, masked = 0, 0
    for instance in wwm_instances:
        ids = original_ids(instance)
        chosen = set(instance.masked_lm_positions)
        for word in words(ids, continuation):
            hit = [p in chosen for p in word]
            assert all(hit) or not any(hit), (ids, word, instance.masked_lm_positions)
            multi_piece_masked += len(word) > 1 and all(hit)
        assert len(chosen) <= num_to_predict(len(ids))
        assert not {ids[p] for p in chosen} & {CLS, SEP, PAD}
        lengths += len(ids)
        masked += len(chosen)
    assert multi_piece_masked > 1000  # the property is not vacuous: many split words were masked whole
    assert abs(masked / lengths - 0.15) <= 0.005
    mask, same, other = replacement_split(_static_rows(wwm_instances))
    assert abs(mask - 0.8) <= 0.01 and abs(same - 0.1) <= 0.01 and abs(other - 0.1) <= 0.01


def _dynamic(features, masker, seed=11, batch_size=512):
    ds = tf.data.Dataset.from_tensor_slices(features).batch(batch_size)
    out = list(masker.dynamic(ds, seed=seed).as_numpy_iterator())
    return {k: np.concatenate([o[k] for o in out]) for k in out[0]}


@pytest.mark.parametrize("whole_word_masking", [False, True], ids=["wordpiece", "whole_word"])
def test_dynamic_masking_statistics_on_reviews(unmasked_review_features, vocab_path, whole_word_masking):
    masker = PretrainingMasker(vocab_path, whole_word_masking=whole_word_masking)
    before = unmasked_review_features
    after = _dynamic(before, masker)
    lengths = before["input_mask"].sum(1)
    weights = after["masked_lm_weights"]
    counts = weights.sum(1).astype(int)
    assert lengths.sum() >= 100_000
    expected = np.array([num_to_predict(n) for n in lengths])
    if whole_word_masking:
        assert (counts <= expected).all() and (counts >= 1).all()
    else:
        np.testing.assert_array_equal(counts, expected)
    assert abs(counts.sum() / lengths.sum() - 0.15) <= 0.005
    assert abs(counts.sum() / (lengths.sum() - 3 * len(lengths)) - 0.15) <= 0.005

    valid = weights > 0
    rows = np.nonzero(valid)[0]
    positions = after["masked_lm_positions"]
    chosen = np.zeros_like(before["input_ids"], bool)
    chosen[rows, positions[valid]] = True
    assert chosen.sum() == counts.sum()  # no position chosen twice
    # Labels are the original ids; nothing outside the chosen positions changes.
    np.testing.assert_array_equal(after["masked_lm_ids"][valid], before["input_ids"][rows, positions[valid]])
    np.testing.assert_array_equal(after["input_ids"][~chosen], before["input_ids"][~chosen])
    assert (positions[~valid] == 0).all() and (after["masked_lm_ids"][~valid] == 0).all()
    assert not np.isin(before["input_ids"][chosen], [CLS, SEP, PAD]).any()
    assert (before["input_mask"][chosen] == 1).all()
    split = replacement_split(
        (after["input_ids"][r], positions[r][valid[r]], after["masked_lm_ids"][r][valid[r]])
        for r in range(len(counts))
    )
    assert np.abs(split - [0.8, 0.1, 0.1]).max() <= 0.01, split
    if whole_word_masking:
        for r in range(0, len(counts), 5):
            for word in words(before["input_ids"][r].tolist(), masker.is_continuation):
                hit = chosen[r, word]
                assert hit.all() or not hit.any()


def test_dynamic_masking_is_seeded_and_new_every_epoch(unmasked_review_features, vocab_path):
    masker = PretrainingMasker(vocab_path)
    features = {k: v[:256] for k, v in unmasked_review_features.items()}
    ds = masker.dynamic(tf.data.Dataset.from_tensor_slices(features).batch(64), seed=5)
    epoch1 = [b["masked_lm_positions"] for b in ds.as_numpy_iterator()]
    epoch2 = [b["masked_lm_positions"] for b in ds.as_numpy_iterator()]
    assert not all(np.array_equal(a, b) for a, b in zip(epoch1, epoch2)), "masks must change between epochs"
    again = masker.dynamic(tf.data.Dataset.from_tensor_slices(features).batch(64), seed=5)
    assert all(np.array_equal(a, b["masked_lm_positions"]) for a, b in zip(epoch1, again.as_numpy_iterator()))
    other = masker.dynamic(tf.data.Dataset.from_tensor_slices(features).batch(64), seed=6)
    assert not all(
        np.array_equal(a, b["masked_lm_positions"]) for a, b in zip(epoch1, other.as_numpy_iterator())
    )


def test_static_masking_is_seeded(review_instances, vocab_path):
    masker = PretrainingMasker(vocab_path, whole_word_masking=True)
    ids = original_ids(review_instances[0])
    assert masker.mask_ids(ids, random.Random(1)) == masker.mask_ids(ids, random.Random(1))
    assert masker.mask_ids(ids, random.Random(1)) != masker.mask_ids(ids, random.Random(2))


BAD_MASKER_ARGUMENTS = [
    ({"masked_lm_prob": 0.0}, r"masked_lm_prob must be a number in \(0, 1\). Received: masked_lm_prob=0.0"),
    ({"masked_lm_prob": 1.0}, r"masked_lm_prob=1.0"),
    ({"masked_lm_prob": 1.5}, r"masked_lm_prob=1.5"),
    ({"masked_lm_prob": "0.15"}, r"masked_lm_prob='0.15'"),
    (
        {"max_predictions_per_seq": 0},
        r"max_predictions_per_seq must be a positive integer. Received: max_predictions_per_seq=0",
    ),
    ({"max_predictions_per_seq": -3}, r"max_predictions_per_seq=-3"),
    ({"max_predictions_per_seq": 2.5}, r"max_predictions_per_seq=2.5"),
    ({"whole_word_masking": "yes"}, r"whole_word_masking='yes'"),
]


def test_masker_rejects_bad_arguments(vocab_path):
    vocab = load_vocabulary(vocab_path)
    for kwargs, message in BAD_MASKER_ARGUMENTS:
        with pytest.raises(ValueError, match=message):
            PretrainingMasker(vocab, **kwargs)


def test_masker_rejects_vocabulary_without_special_tokens(vocab_path, tmp_path):
    vocab = [t for t in load_vocabulary(vocab_path) if t not in ("[MASK]", "[SEP]")]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"lacks BERT's special tokens \['\[SEP\]', '\[MASK\]'\]"):
        PretrainingMasker(str(path))
    with pytest.raises(FileNotFoundError, match="No vocabulary at"):
        PretrainingMasker(str(tmp_path / "missing.txt"))
