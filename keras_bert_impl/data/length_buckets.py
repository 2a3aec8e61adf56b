"""Length-bucketed training batches: rows of similar wordpiece length together, each batch
cut to its longest row, in an order that is a pure function of (seed, pass).

MR sentences average 27 wordpieces; padded to a sequence length of 64 or 128, most of a
training step multiplies padding. Sorting the whole set by length would make a pass run
short batches then long ones (and every pass the same batches); here each pass draws a
permutation, cuts it into chunks of `chunk_batches` batches, sorts each chunk by length and
cuts it into batches, then shuffles the batches. Rows meet new neighbours every pass and
lengths are mixed over the pass, while the padding left is a fraction of fixed-length
batching's. Because a pass's batches depend on (seed, pass number) alone, a run resumed
from a backup and skipped to batch k sees the uninterrupted run's batch k.

Shape legend: N rows, B batch, S sequence length, T a batch's cut width.
"""

import numpy as np
import tensorflow as tf

from keras_bert_impl.tensor_names import MODEL_ID_INPUTS


def wordpiece_lengths(preprocessor, texts):
    """Each row's length in wordpieces at the preprocessor's sequence length (truncation
    included): int array [N]. `texts`: a string tensor [N], or a pair of them."""
    packed = preprocessor(texts)
    return tf.reduce_sum(tf.cast(packed["padding_mask"], tf.int32), axis=1).numpy()


def bucketed_batch_indices(lengths, batch_size, seed, epochs, chunk_batches=64):
    """Row indices of every batch of `epochs` passes, pass after pass.

    Args:
        lengths: int array [N], each row's length in wordpieces.
        batch_size: int, rows per batch.
        seed: int; pass e draws from numpy's default_rng([seed, e]).
        epochs: int, the number of passes.
        chunk_batches: int, batches per sorted chunk.

    Returns:
        a list of int64 arrays [B]: ceil(N / batch_size) batches per pass (only the last
        chunk's last batch of a pass can be short), every row once per pass.

    Example:
    >>> batches = bucketed_batch_indices(np.array([5, 30, 6, 31, 7, 29]), batch_size=2, seed=0, epochs=1)
    >>> sorted(sorted(np.array([5, 30, 6, 31, 7, 29])[b].tolist()) for b in batches)
    [[5, 6], [7, 29], [30, 31]]
    """
    lengths = np.asarray(lengths)
    chunk = batch_size * chunk_batches
    batches = []
    for number in range(epochs):
        rng = np.random.default_rng([seed, number])
        order = rng.permutation(len(lengths))
        one_pass = []
        for start in range(0, len(order), chunk):
            part = order[start : start + chunk]
            part = part[np.argsort(lengths[part], kind="stable")]
            one_pass += [part[i : i + batch_size].astype(np.int64) for i in range(0, len(part), batch_size)]
        batches += [one_pass[i] for i in rng.permutation(len(one_pass))]
    return batches


def index_dataset(batches):
    """`bucketed_batch_indices`' batches as a tf.data.Dataset of int64 index vectors [B]."""
    return tf.data.Dataset.from_tensor_slices(
        tf.ragged.constant([b.tolist() for b in batches], dtype=tf.int64)
    )


def cut_to_longest(x, multiple=8):
    """A batch of model inputs ({token_ids, segment_ids, padding_mask: [B, S]}, other keys
    [B] or [B, ...] left whole) cut to its longest row, rounded up to a multiple of
    `multiple` (at most S): the model ignores padded positions, so its outputs are those of
    the whole width, and a compiled step meets few distinct shapes.

    Example:
    >>> x = {"token_ids": tf.constant([[2, 5, 3, 0, 0, 0, 0, 0, 0, 0]]),
    ...      "segment_ids": tf.zeros([1, 10], tf.int32),
    ...      "padding_mask": tf.constant([[1, 1, 1, 0, 0, 0, 0, 0, 0, 0]])}
    >>> cut_to_longest(x, multiple=4)["token_ids"].numpy()
    array([[2, 5, 3, 0]], dtype=int32)
    """
    width = tf.shape(x["padding_mask"])[1]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(x["padding_mask"], tf.int32), axis=1))
    cut = tf.minimum(width, (longest + multiple - 1) // multiple * multiple)
    return {key: value[:, :cut] if key in MODEL_ID_INPUTS else value for key, value in x.items()}
