"""The distillation transfer set (moved from commands/distill.py): its batches, label weights
and an order that depends on (seed, epoch) alone."""

import numpy as np
import pytest

from keras_bert_impl.data import transfer_dataset
from keras_bert_impl.tokenization import BertPreprocessor

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "fine", "film", "very"]


def _batches(length_buckets, seed=0, epochs=2, targets=(1, 0, 1)):
    preprocessor = BertPreprocessor(VOCAB, sequence_length=8)
    texts = ["good film", "bad film", "very good"]
    dataset = transfer_dataset(
        preprocessor,
        texts,
        None,
        None if targets is None else [np.int32(t) for t in targets],
        ["fine", "very fine film"],
        2,
        seed,
        epochs,
        length_buckets,
    )
    return list(dataset.as_numpy_iterator())


def test_labelled_and_unlabeled_rows_mixed_with_their_weights_every_epoch():
    for length_buckets in (False, True):
        batches = _batches(length_buckets)
        assert len(batches) == 6  # 5 rows in batches of 2, two epochs
        weights = np.concatenate([x["label_weight"] for x, _ in batches])
        labels = np.concatenate([y for _, y in batches])
        assert sorted(weights.tolist()) == [0.0] * 4 + [1.0] * 6
        assert sorted(labels[weights == 1].tolist()) == [0, 0, 1, 1, 1, 1]
        assert (labels[weights == 0] == 0).all()  # placeholders


def test_the_order_is_a_function_of_the_seed_and_the_epoch():
    first, again, other = _batches(False), _batches(False), _batches(False, seed=1)
    ids = [[x["token_ids"].tolist() for x, _ in batches] for batches in (first, again, other)]
    assert ids[0] == ids[1] and ids[0] != ids[2]


def test_without_targets_the_batches_are_model_inputs():
    x = _batches(False, targets=None)[0]
    assert sorted(x) == ["padding_mask", "segment_ids", "token_ids"]


def test_pairs_with_unlabeled_texts_are_refused():
    # The unlabeled texts have no text_b: gathering theirs failed mid-iteration (InvalidArgumentError).
    preprocessor = BertPreprocessor(VOCAB, sequence_length=8)
    with pytest.raises(ValueError, match="unlabeled texts are single texts, but the labelled rows are pairs"):
        transfer_dataset(
            preprocessor,
            ["good", "bad"],
            ["film", "film"],
            [np.int32(1), np.int32(0)],
            ["fine"],
            2,
            0,
            1,
            False,
        )
