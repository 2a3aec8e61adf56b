"""A Keras mean loss that divides by the whole global batch under tf.distribute."""

import keras
from keras import ops

from keras_bert_impl.models.masked_sparse_crossentropy import sum_over_replicas


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GlobalBatchLoss(keras.losses.Loss):
    """A Keras loss with the "sum_over_batch_size" reduction, made exact under a strategy.

    Keras reduces a loss on each replica: the replica's weighted sum over its own rows,
    divided by its own row count and then by the number of replicas. When the global
    batch divides evenly that is the global mean; when it does not (the last, partial
    batch of an epoch: 5 rows over 2 replicas are 3 and 2), it is
    `(mean of 3 + mean of 2) / 2`, so that step trains with other weights than one device
    would (measured: 8.8e-3 apart after 2 epochs of 21 rows at batch 8). Here each replica
    divides its weighted sum by the element count of the whole global batch (an
    all-reduce), so the replicas' gradients add up to one device's, whatever the split.
    Without a strategy, on one replica and on other backends it equals `loss`.

    Args:
        loss: a `keras.losses.Loss` with reduction "sum_over_batch_size" (Keras' default),
            e.g. `keras.losses.SparseCategoricalCrossentropy(from_logits=True)`.
        name: str (default: the wrapped loss's name).

    Example:
    >>> loss = GlobalBatchLoss(keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    >>> logits = np.log(np.array([[0.5, 0.5], [0.25, 0.75]]))  # [B=2, C=2]
    >>> round(float(loss(np.array([0, 1]), logits)), 4)  # (ln 2 + ln 4/3) / 2
    0.4904
    """

    def __init__(self, loss, name=None, dtype=None):
        if isinstance(loss, dict):
            loss = keras.saving.deserialize_keras_object(loss)
        if not isinstance(loss, keras.losses.Loss) or loss.reduction != "sum_over_batch_size":
            raise ValueError(
                "GlobalBatchLoss wraps a keras.losses.Loss whose reduction is 'sum_over_batch_size' (the "
                f"default). Received: loss={loss!r}"
                + (f" with reduction={loss.reduction!r}" if isinstance(loss, keras.losses.Loss) else "")
            )
        super().__init__(name=name or loss.name, reduction="sum_over_batch_size", dtype=dtype or loss.dtype)
        self.loss = loss
        # The same loss, unreduced: Keras still converts dtypes and applies the sample weight.
        self._per_element = loss.__class__.from_config({**loss.get_config(), "reduction": "none"})

    def call(self, y_true, y_pred):
        return self.loss.call(y_true, y_pred)

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Keras' own reduction would divide by this replica's count; this divides by the
        # global batch's and so replaces it (MaskedSparseCrossentropy's rule).
        with keras.name_scope(self.name):
            values = ops.cast(
                self._per_element(y_true, y_pred, sample_weight=sample_weight), self.dtype
            )  # [B, ...]
            count = ops.cast(ops.size(values), self.dtype)
            return ops.divide_no_nan(ops.sum(values), sum_over_replicas(count))

    def get_config(self):
        return {
            "loss": keras.saving.serialize_keras_object(self.loss),
            "name": self.name,
            "dtype": self.dtype,
        }
