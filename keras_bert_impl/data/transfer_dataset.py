"""The distillation transfer set as one tf.data pipeline: labelled rows and unlabeled texts,
tokenized in the graph, shuffled by (seed, epoch) alone so a resumed run sees the same batches."""

import numpy as np
import tensorflow as tf

from keras_bert_impl.data.length_buckets import (
    bucketed_batch_indices,
    cut_to_longest,
    index_dataset,
    wordpiece_lengths,
)


def transfer_dataset(
    preprocessor, texts, texts_b, targets, unlabeled, batch_size, seed, epochs, length_buckets
):
    """Labelled rows and unlabeled texts, shuffled together, every epoch of the run in one
    dataset: the `Distiller`'s transfer set (`kbert distill`'s, task and general).

    The batches are ({model inputs, label_weight}, y), label_weight 1 for a labelled row and
    0 for an unlabeled text (its y a placeholder); model inputs alone when `targets` is
    None (general distillation's unlabeled text). Epoch e is in the order of numpy's
    default_rng((seed, e)); with `length_buckets`, rows of similar length are batched
    together and each batch cut to its longest row (keras_bert_impl.data.length_buckets).
    The order is a function of (seed, epoch) alone, so a resumed run that skips to batch k
    sees the uninterrupted run's batch k (tf.data's reshuffle_each_iteration draws each
    epoch's order from a generator whose state is not kept across dataset objects, which is
    what fit_resumable builds on a resume).

    Args:
        preprocessor: a `BertPreprocessor` (the teacher's vocabulary and length).
        texts, texts_b: the labelled rows' texts (texts_b None, or None entries, for
            single-text tasks).
        targets: the labelled rows' labels (arrays of one shape), or None.
        unlabeled: the unlabeled texts.
        batch_size, seed, epochs: the batches, their order's seed, the epochs in the dataset.
        length_buckets: batch rows of similar length together.

    Example:
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "fine"]
    >>> preprocessor = BertPreprocessor(vocabulary, sequence_length=8)
    >>> batches = transfer_dataset(preprocessor, ["good", "bad"], None, [1, 0], ["fine"], 2, 0, 1, False)
    >>> [int(x["label_weight"].shape[0]) for x, y in batches]
    [2, 1]
    """
    labelled = len(texts)
    if unlabeled and texts_b is not None and any(t is not None for t in texts_b):
        # An unlabeled text has no second text to pair: the rows' text_b would not cover it.
        raise ValueError(
            f"unlabeled texts are single texts, but the labelled rows are pairs (texts_b). Received: "
            f"{len(unlabeled)} unlabeled texts; give pairs as labelled rows, or no unlabeled texts."
        )
    all_texts = list(texts) + list(unlabeled)
    features = {"text": tf.constant(all_texts, tf.string)}
    if targets is not None:
        y = np.stack([np.asarray(t) for t in targets])
        if unlabeled:
            y = np.concatenate(
                [y, np.zeros((len(unlabeled),) + y.shape[1:], y.dtype)]
            )  # placeholders, weight 0
        weight = np.concatenate([np.ones(labelled, "float32"), np.zeros(len(unlabeled), "float32")])
        features["label_weight"] = tf.constant(weight)
        targets_tensor = tf.constant(y)
    if texts_b is not None and any(t is not None for t in texts_b):
        features["text_b"] = tf.constant(list(texts_b), tf.string)
    if length_buckets:
        lengths = wordpiece_lengths(
            preprocessor,
            features["text"] if "text_b" not in features else (features["text"], features["text_b"]),
        )  # [N]
        batches = index_dataset(bucketed_batch_indices(lengths, batch_size, seed, epochs))
    else:
        orders = np.stack(
            [np.random.default_rng((seed, epoch)).permutation(len(all_texts)) for epoch in range(epochs)]
        )
        # [epochs, N] -> per epoch, batches of row indices (the last one of an epoch may be short).
        batches = tf.data.Dataset.from_tensor_slices(orders).flat_map(
            lambda order: tf.data.Dataset.from_tensor_slices(order).batch(batch_size)
        )

    def preprocess(rows):
        batch = {key: tf.gather(value, rows) for key, value in features.items()}
        inputs = batch["text"] if "text_b" not in batch else (batch["text"], batch["text_b"])
        x = preprocessor(inputs)
        if length_buckets:
            x = cut_to_longest(x)
        if targets is None:
            return x
        return {**x, "label_weight": batch["label_weight"]}, tf.gather(targets_tensor, rows)

    return batches.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
