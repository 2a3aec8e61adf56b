"""Sparse cross-entropy averaged over the weighted positions only: BERT's masked-LM loss."""

import keras
from keras import ops


def sum_over_replicas(value):
    """`value` summed over the replicas of a tf.distribute strategy (itself outside one)."""
    if keras.backend.backend() != "tensorflow":
        return value
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MaskedSparseCrossentropy(keras.losses.Loss):
    """`sum(weight * cross_entropy) / sum(weight)` over the positions of a batch.

    Google's run_pretraining.py (and Model Garden's masked-LM and tagging tasks) average the
    MLM loss over the real masked positions: `masked_lm_weights` is 0 on the padding of the
    `max_predictions_per_seq` slots. Keras' `SparseCategoricalCrossentropy` with a
    `sample_weight` divides by every slot instead (B * P), so at 64 tokens, where about 9
    of 20 slots are real, the MLM loss and its gradient come out at less than half their
    size, and its balance with the NSP loss shifts with the sequence length.

    Under a tf.distribute strategy each replica divides its weighted sum by the weight
    summed over all replicas (an all-reduce), so the summed gradients are those of the
    whole global batch on one device, even when the replicas' shares hold different
    numbers of real positions (a per-replica mean would not be).

    Args:
        from_logits: bool, whether `y_pred` are logits (default) or probabilities.
        name: str.

    Example:
    >>> y_true, weights = np.array([[0, 1, 1]]), np.array([[1.0, 1.0, 0.0]])  # the third slot is padding
    >>> y_pred = np.log(np.array([[[0.5, 0.5], [0.25, 0.75], [0.9, 0.1]]]))  # logits [B=1, P=3, V=2]
    >>> # (ln 2 + ln 4/3) / 2:
    >>> round(float(MaskedSparseCrossentropy()(y_true, y_pred, sample_weight=weights)), 4)
    0.4904
    >>> keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # divides by all 3 slots
    >>> round(float(keras_loss(y_true, y_pred, sample_weight=weights)), 4)
    0.3269
    """

    def __init__(self, from_logits=True, name="masked_sparse_crossentropy", dtype=None):
        if not isinstance(from_logits, bool):
            raise ValueError(f"from_logits must be True or False. Received: from_logits={from_logits!r}")
        super().__init__(name=name, reduction="sum_over_batch_size", dtype=dtype)
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        # y_true [B, P] ids, y_pred [B, P, V] -> [B, P] per-position losses.
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=self.from_logits)

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Keras' reduction divides by the slot count or by the per-replica weight sum;
        # this divides by the global weight sum, and so replaces it.
        with keras.name_scope(self.name):
            values = ops.cast(self.call(y_true, y_pred), self.dtype)  # [B, P]
            if sample_weight is None:
                weights = ops.ones_like(values)
            else:
                weights = ops.broadcast_to(ops.cast(sample_weight, self.dtype), ops.shape(values))  # [B, P]
            total = ops.sum(values * weights)
            count = sum_over_replicas(ops.sum(weights))
            # The replicas' values add up to the global mean: what Keras expects of a loss
            # under a strategy (it sums the replicas' gradients).
            return ops.divide_no_nan(total, count)

    def get_config(self):
        return {"from_logits": self.from_logits, "name": self.name, "dtype": self.dtype}
