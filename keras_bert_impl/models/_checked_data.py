"""Checks the id inputs of `fit`, `evaluate` and `predict` before Keras compiles a step.

`BertBackbone.__call__` checks every concrete input (rank, dtype, values in range) and
says what is wrong. Inside `fit`, `evaluate` and `predict` the model is called on traced
tensors, whose values are unknown, so that check cannot run there: on the JAX backend an
out-of-range token id then read no row of the embedding table and came out as NaN
outputs, without an error (jnp.take fills outside the table), and on TensorFlow it was
an InvalidArgumentError from a gather deep in the graph. Data given as arrays (a dict of
numpy arrays or tensors) is checked here first, once per call, with the same messages
(and a head's own inputs, such as the pretrainer's mask_positions); a `tf.data.Dataset`
or a generator is passed through unchecked.
"""

from keras_bert_impl.tensor_names import MODEL_ID_INPUTS


def _id_inputs(x):
    """The backbone's three id inputs in `x` when it is a dict holding all of them, else None."""
    if not isinstance(x, dict) or not all(key in x for key in MODEL_ID_INPUTS):
        return None
    return {key: x[key] for key in MODEL_ID_INPUTS}


class ChecksIdData:
    """Mixin for a functional model on a `BertBackbone` (before keras.Model in its bases):
    `fit`, `evaluate`, `predict` and their `*_on_batch` forms check array inputs with the
    backbone's input check first. Subclasses name the backbone in `_checking_backbone`."""

    def _checking_backbone(self):
        raise NotImplementedError

    def _check_task_inputs(self, x):
        """Checks the model's own inputs beyond the backbone's three (the pretrainer's
        mask_positions); nothing by default."""

    def _check_id_data(self, x):
        inputs = _id_inputs(x)
        if inputs is not None:
            self._checking_backbone()._validate_inputs(inputs)
            self._check_task_inputs(x)

    def fit(self, x=None, *args, **kwargs):
        self._check_id_data(x)
        return super().fit(x, *args, **kwargs)

    def evaluate(self, x=None, *args, **kwargs):
        self._check_id_data(x)
        return super().evaluate(x, *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        self._check_id_data(x)
        return super().predict(x, *args, **kwargs)

    def train_on_batch(self, x, *args, **kwargs):
        self._check_id_data(x)
        return super().train_on_batch(x, *args, **kwargs)

    def test_on_batch(self, x, *args, **kwargs):
        self._check_id_data(x)
        return super().test_on_batch(x, *args, **kwargs)

    def predict_on_batch(self, x):
        self._check_id_data(x)
        return super().predict_on_batch(x)
