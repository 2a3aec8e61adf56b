"""Keras' LossScaleOptimizer with one skip-or-apply decision for all replicas."""

import keras
from keras import ops

from keras_bert_impl.models.masked_sparse_crossentropy import sum_over_replicas


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class AllReplicaLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """`keras.optimizers.LossScaleOptimizer` that skips a step when any replica overflowed.

    Float16 training scales the loss up and skips the step (halving the scale) when a
    gradient is not finite. Keras 3.15 decides that from each replica's own gradients
    (keras/src/optimizers/loss_scale_optimizer.py `_tf_apply`): on the merge-call path
    (CPUs, GPUs without XLA) it takes the first replica's verdict, assuming the gradients
    were all-reduced already, which in Keras 3 happens only later, inside the inner
    optimizer's update. So when only the second replica's rows overflow, the step is
    applied with an infinite gradient and the weights turn NaN (measured under mirrored
    on 2 devices), where one device skips the step. Here the replicas' verdicts are
    all-reduced, so every replica skips or applies together, as one device
    would with the whole batch. Without a strategy, on one replica and on other backends it
    is Keras' LossScaleOptimizer.

    Args: those of `keras.optimizers.LossScaleOptimizer`.

    Example:
    >>> optimizer = AllReplicaLossScaleOptimizer(keras.optimizers.AdamW(1e-4))
    """

    def check_finite(self, grads):
        finite = super().check_finite(grads)
        # tf.distribute reduces by SUM or MEAN only: count the replicas that overflowed.
        overflowed = sum_over_replicas(1.0 - ops.cast(finite, "float32"))
        return overflowed < 0.5
