"""Shared plumbing for models that wrap a `BertBackbone` (heads)."""

import keras

from keras_bert_impl.layers.sublayer_config import deserialize_sublayers
from keras_bert_impl.models._checked_data import ChecksIdData
from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.head_compile import HeadCompile
from keras_bert_impl.models._early_attributes import set_attribute
from keras_bert_impl.models.quantized_layers import (
    record_quantized_layers,
    restore_quantized_layers,
    split_quantized_config,
)


class BertTask(ChecksIdData, HeadCompile, keras.Model):
    """Base of the BERT heads: holds the backbone, serialises it in the config,
    and rebuilds the head around it on load (so tied weights stay tied).

    Subclasses build their functional graph, call `super().__init__(inputs=...,
    outputs=..., **kwargs)`, set their own config attributes and list them in
    `_task_config_keys`.
    """

    _task_config_keys = ()

    def __init__(self, *args, **kwargs):
        # The head computes in its backbone's policy (its own layers pass it, or float32 for
        # the logits): the head's policy is the backbone's too, so that `compile` wraps the
        # optimizer in Keras' LossScaleOptimizer under mixed_float16 and the config says so.
        kwargs.pop("dtype", None)  # a saved head's config names it; the backbone's decides
        super().__init__(*args, **kwargs)
        self.dtype_policy = self.backbone.dtype_policy

    def __setattr__(self, name, value):
        # Layers are attributes before keras.Model.__init__ (see models/_early_attributes.py).
        set_attribute(self, name, value, super().__setattr__)

    def _checking_backbone(self):
        return self.backbone

    @staticmethod
    def _check_backbone(backbone):
        if not isinstance(backbone, BertBackbone):
            raise ValueError(
                "backbone must be a keras_bert_impl.BertBackbone, e.g. "
                f"BertBackbone.from_preset('bert_tiny'). Received: backbone={backbone!r}"
            )

    def _output_layers(self, backbone, num_classes, dropout, activation=None):
        """Sets the backbone and the head's dropout and `logits` Dense (before Model.__init__,
        which the head calls on the graph they make). The Dense computes in float32: logits
        and probabilities in float32 keep the loss stable under mixed precision."""
        self.backbone = backbone
        self.output_dropout = keras.layers.Dropout(
            dropout, name="output_dropout", dtype=backbone.dtype_policy
        )
        self.output_dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=backbone.initializer_range),
            activation=activation,
            dtype="float32",
            name="logits",
        )

    def get_config(self):
        config = super().get_config()
        config.update({"backbone": keras.layers.serialize(self.backbone)})
        config.update({key: getattr(self, key) for key in self._task_config_keys})
        # The head's own quantized layers (the backbone's are in its config).
        return record_quantized_layers(config, self, exclude=self.backbone)

    @classmethod
    def from_config(cls, config):
        config, quantized = split_quantized_config(cls, config)
        task = cls(**deserialize_sublayers(config, "backbone"))
        restore_quantized_layers(task, quantized)
        return task
