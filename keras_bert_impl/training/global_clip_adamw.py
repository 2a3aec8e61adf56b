"""AdamW whose global-norm clipping sees the whole batch's gradient under tf.distribute."""

import keras


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GlobalClipAdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` that clips by the norm of the all-replica gradient.

    Keras clips inside each replica, before the gradients are summed across replicas
    (keras/src/optimizers/base_optimizer.py `_backend_apply_gradients`): each replica
    clips its own share, so with clipping active, training on N replicas differs from
    one device with the same global batch (the issue's mirrored == one-device check).
    Here every replica sums the gradients first (one extra all-reduce per step), takes
    the global norm of that sum, and scales its own share by
    `clipnorm / max(norm, clipnorm)`, so the sum the update applies is exactly
    `tf.clip_by_global_norm(total, clipnorm)`, as on one device. Without a strategy or
    with one replica it is plain AdamW, and so it is on the JAX and PyTorch backends.

    Keras' AdamW leaves the names given to `exclude_from_weight_decay` out of its config, so
    an optimizer saved in a .keras file came back decaying the LayerNorm and bias weights
    that `create_optimizer` exempts; this one keeps `var_names` in its config.

    Args: those of `keras.optimizers.AdamW`, and
        exclude_from_weight_decay_names: list of str or None. Variable-name substrings
            exempt from weight decay (`exclude_from_weight_decay(var_names=...)`).

    Example:
    >>> optimizer = GlobalClipAdamW(learning_rate=5e-5, weight_decay=0.01, global_clipnorm=1.0)
    """

    def __init__(self, *args, exclude_from_weight_decay_names=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._excluded_names = None
        if exclude_from_weight_decay_names:
            self.exclude_from_weight_decay(var_names=exclude_from_weight_decay_names)

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        super().exclude_from_weight_decay(var_list=var_list, var_names=var_names)
        self._excluded_names = sorted(set(var_names)) if var_names else None

    def get_config(self):
        config = super().get_config()
        config["exclude_from_weight_decay_names"] = self._excluded_names
        return config

    def _clip_gradients(self, grads):
        if keras.backend.backend() != "tensorflow":
            # No tf.distribute replicas elsewhere: JAX's keras.distribution shards one global
            # computation, whose gradient norm is already the whole batch's.
            return super()._clip_gradients(grads)
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        if not self.global_clipnorm or context is None or context.num_replicas_in_sync == 1:
            return super()._clip_gradients(grads)
        present = [g for g in grads if g is not None]
        total = context.all_reduce(tf.distribute.ReduceOp.SUM, present)
        norm = tf.linalg.global_norm(total)
        clip = tf.cast(self.global_clipnorm, norm.dtype)
        scale = clip / tf.maximum(norm, clip)
        return [None if g is None else g * tf.cast(scale, g.dtype) for g in grads]
