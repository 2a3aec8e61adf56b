"""BERT's masked-LM corruption: Google's create_masked_lm_predictions, in Python
(static masks, written once) and as TensorFlow ops (dynamic masks, drawn afresh
every epoch inside tf.data).

Shape legend: B batch, S max_seq_length, P max_predictions_per_seq, V vocabulary.
"""

import numpy as np
import tensorflow as tf

from keras_bert_impl.tokenization.vocabulary import is_continuation, load_vocabulary, special_token_ids
from keras_bert_impl.validation import check_bool, check_fraction, check_int

# Google's replacement split for a chosen position: 80% [MASK]; of the other
# 20%, half keep the original token and half take a random vocabulary entry.
MASK_PROB = 0.8
KEEP_PROB_OF_REST = 0.5


class PretrainingMasker:
    """Chooses the masked-LM targets of a packed `[CLS] A [SEP] B [SEP]` sequence.

    Follows google-research/bert create_pretraining_data.py: the number of
    targets is `min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))`
    where `len(tokens)` counts [CLS] and [SEP]; candidates are all positions but
    [CLS] and [SEP] (and [PAD], which never occurs before padding); each chosen
    position becomes [MASK] 80% of the time, stays unchanged 10%, and becomes a
    uniformly random vocabulary id 10% (any id, as Google draws from the whole
    vocabulary). With `whole_word_masking`, a `##` piece joins the candidate
    before it, so a word (a piece and its following `##` pieces) is masked
    whole or not at all, and a word that would overshoot the target count is
    skipped, as in Google's `do_whole_word_mask`. Like Google's code, a `##`
    piece that truncation left at the start of B joins the last word of A
    (one more reason such a pair is masked together, never split). Each piece
    of a chosen word draws its own 80/10/10 replacement, as in Google's code.

    `mask_ids` is the Python algorithm, consuming a `random.Random` exactly as
    Google's code does (same draws, same order), so a shared seed reproduces
    Google's output. `mask_batch` is the same algorithm as stateless TF ops on
    padded batches; `dynamic` maps it over a tf.data pipeline.

    Args:
        vocabulary: list of tokens, or a path to vocab.txt. Must hold [PAD],
            [UNK], [CLS], [SEP] and [MASK].
        masked_lm_prob: fraction of tokens to predict, in (0, 1).
        max_predictions_per_seq: cap on predictions per sequence (>= 1).
        whole_word_masking: mask all pieces of a word together.

    Example:
    >>> import random
    >>> masker = PretrainingMasker("data/minilm/vocab.txt", masked_lm_prob=0.4)
    >>> # [CLS] the quick brown fox [SEP]: two targets, here both replaced by [MASK] (103)
    >>> masker.mask_ids([101, 1996, 4248, 2829, 4419, 102], random.Random(0))
    ([101, 103, 4248, 103, 4419, 102], [1, 3], [1996, 2829])
    """

    def __init__(self, vocabulary, masked_lm_prob=0.15, max_predictions_per_seq=20, whole_word_masking=False):
        vocabulary = load_vocabulary(vocabulary)
        check_fraction("masked_lm_prob", masked_lm_prob)
        check_int("max_predictions_per_seq", max_predictions_per_seq, 1)
        check_bool("whole_word_masking", whole_word_masking)
        self.vocabulary = vocabulary
        self.masked_lm_prob = float(masked_lm_prob)
        self.max_predictions_per_seq = max_predictions_per_seq
        self.whole_word_masking = whole_word_masking
        self.pad_id, self.cls_id, self.sep_id, self.mask_id = special_token_ids(
            vocabulary, "[PAD]", "[CLS]", "[SEP]", "[MASK]"
        )
        self.vocabulary_size = len(vocabulary)
        self.is_continuation = np.array([is_continuation(t) for t in vocabulary], bool)

    def num_to_predict(self, length):
        """Google's target count for a packed sequence of `length` tokens."""
        # Python's round() rounds halves to even, like Google's (and tf.round).
        return min(self.max_predictions_per_seq, max(1, int(round(length * self.masked_lm_prob))))

    # ---- static: Python, Google's draws ---------------------------------

    def mask_ids(self, token_ids, rng):
        """Masks one packed sequence of ids with `rng` (a random.Random).

        Returns (output_ids, positions, label_ids): the corrupted ids, and the
        chosen positions in increasing order with their original ids."""
        skip = (self.cls_id, self.sep_id, self.pad_id)
        candidates = []  # lists of positions, one per word (one per piece without whole-word masking)
        for i, token in enumerate(token_ids):
            if token in skip:
                continue
            if self.whole_word_masking and candidates and self.is_continuation[token]:
                candidates[-1].append(i)
            else:
                candidates.append([i])
        rng.shuffle(candidates)

        output = list(token_ids)
        num_to_predict = self.num_to_predict(len(token_ids))
        masked = []
        for positions in candidates:
            if len(masked) >= num_to_predict:
                break
            # A whole word that would overshoot is skipped, not cut.
            if len(masked) + len(positions) > num_to_predict:
                continue
            for index in positions:
                if rng.random() < MASK_PROB:
                    output[index] = self.mask_id
                elif rng.random() < KEEP_PROB_OF_REST:
                    pass
                else:
                    output[index] = rng.randint(0, self.vocabulary_size - 1)
                masked.append((index, token_ids[index]))
        masked.sort()
        return output, [p for p, _ in masked], [t for _, t in masked]

    # ---- dynamic: TF ops ------------------------------------------------

    def mask_batch(self, features, seed):
        """Masks a padded batch in the graph.

        Args:
            features: dict with `input_ids` and `input_mask` [B, S] (int); other
                keys pass through.
            seed: int tensor [2], the stateless seed of this batch.

        Returns:
            `features` with `input_ids` corrupted and `masked_lm_positions`,
            `masked_lm_ids` (int32 [B, P]) and `masked_lm_weights` (float32
            [B, P]) added, padded like Google's records (position 0, id 0,
            weight 0)."""
        ids = tf.cast(features["input_ids"], tf.int32)  # [B, S]
        input_mask = tf.cast(features["input_mask"], tf.int32)
        batch, width = tf.shape(ids)[0], tf.shape(ids)[1]
        word_seed, choice_seed, keep_seed, random_seed = tf.unstack(
            tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 4)
        )

        length = tf.reduce_sum(input_mask, axis=1)  # [B], counts [CLS]/[SEP] as Google's len(tokens)
        n = tf.cast(tf.round(tf.cast(length, tf.float64) * self.masked_lm_prob), tf.int32)
        n = tf.minimum(self.max_predictions_per_seq, tf.maximum(1, n))  # [B]
        candidate = (input_mask > 0) & (ids != self.cls_id) & (ids != self.sep_id) & (ids != self.pad_id)

        if self.whole_word_masking:
            continuation = tf.gather(tf.constant(self.is_continuation), ids) & candidate
            after_first = tf.cumsum(tf.cast(candidate, tf.int32), axis=1, exclusive=True) > 0
            start = candidate & ~(continuation & after_first)  # [B, S] first piece of each word
        else:
            start = candidate
        word = tf.cumsum(tf.cast(start, tf.int32), axis=1) - 1  # [B, S] word number of each piece
        rows = tf.range(batch)[:, None]
        slot = rows * width + tf.maximum(word, 0)  # [B, S] flat (row, word) index
        dump = batch * width  # non-candidates go to a discarded segment
        word_size = tf.math.unsorted_segment_sum(
            tf.cast(candidate, tf.int32), tf.where(candidate, slot, dump), dump + 1
        )[:-1]  # [B*S] pieces per (row, word)

        # Words in a random order: the start pieces sorted by a uniform key.
        key = tf.where(start, tf.random.stateless_uniform([batch, width], word_seed), 2.0)
        order = tf.argsort(key, axis=1, stable=True)  # [B, S]
        ranked_start = tf.gather(start, order, batch_dims=1)  # [B, S]
        ranked_slot = tf.gather(slot, order, batch_dims=1)
        ranked_size = tf.where(ranked_start, tf.gather(word_size, ranked_slot), 0)  # [B, S]

        if self.whole_word_masking:
            # Greedy in the random order: take a word if it still fits the target count.
            def step(count, size):
                take = (size > 0) & (count + size <= n)
                return count + tf.where(take, size, 0)

            after = tf.transpose(
                tf.scan(step, tf.transpose(ranked_size), initializer=tf.zeros_like(n))
            )  # [B, S]
            before = tf.concat(
                [tf.zeros_like(n)[:, None], after[:, :-1]], axis=1
            )  # count when word k is tried
            take = (ranked_size > 0) & (before + ranked_size <= n[:, None])
        else:
            take = ranked_start & (tf.cumsum(tf.cast(ranked_start, tf.int32), axis=1) <= n[:, None])
        word_taken = tf.math.unsorted_segment_max(
            tf.cast(take, tf.int32), tf.where(take, ranked_slot, dump), dump + 1
        )[:-1]  # [B*S]
        selected = candidate & (tf.gather(word_taken, slot) > 0)  # [B, S]

        choice = tf.random.stateless_uniform([batch, width], choice_seed)
        keep = tf.random.stateless_uniform([batch, width], keep_seed)
        random_ids = tf.random.stateless_uniform(
            [batch, width], random_seed, minval=0, maxval=self.vocabulary_size, dtype=tf.int32
        )
        replaced = tf.where(
            choice < MASK_PROB, self.mask_id, tf.where(keep < KEEP_PROB_OF_REST, ids, random_ids)
        )
        output_ids = tf.where(selected, replaced, ids)

        # Selected positions in increasing order, padded with 0 to P.
        p = self.max_predictions_per_seq
        position = tf.broadcast_to(tf.range(width)[None, :], [batch, width])
        ranked = tf.sort(tf.where(selected, position, width + position), axis=1)
        ranked = tf.concat([ranked, tf.fill([batch, p], 2 * width)], axis=1)[:, :p]  # [B, P]
        valid = ranked < width
        positions = tf.where(valid, ranked, 0)
        label_ids = tf.where(valid, tf.gather(ids, positions, batch_dims=1), 0)

        out = dict(features)
        out["input_ids"] = tf.cast(output_ids, features["input_ids"].dtype)
        out["masked_lm_positions"] = tf.ensure_shape(positions, [None, p])
        out["masked_lm_ids"] = tf.ensure_shape(label_ids, [None, p])
        out["masked_lm_weights"] = tf.ensure_shape(tf.cast(valid, tf.float32), [None, p])
        return out

    def dynamic(self, dataset, seed=12345):
        """Maps `mask_batch` over a batched tf.data.Dataset of unmasked features.

        Each batch gets its own stateless seed from
        `tf.data.Dataset.random(seed, rerandomize_each_iteration=True)`, so masks
        are new on every pass over the data (each epoch) yet the same for the
        same `seed` and the same TensorFlow global seed (`keras.utils.set_random_seed`)."""
        check_int("seed", seed, 0)
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
        return tf.data.Dataset.zip(dataset, seeds).map(
            lambda features, r: self.mask_batch(features, tf.stack([tf.constant(seed, tf.int64), r])),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
