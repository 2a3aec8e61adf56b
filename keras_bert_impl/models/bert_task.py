"""Shared plumbing for models that wrap a `BertBackbone` (heads)."""

import keras

from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.config_fields import check_config_fields


class BertTask(keras.Model):
    """Base of the BERT heads: holds the backbone, serialises it in the config,
    and rebuilds the head around it on load (so tied weights stay tied).

    Subclasses build their functional graph, call `super().__init__(inputs=...,
    outputs=..., **kwargs)`, set their own config attributes and list them in
    `_task_config_keys`.
    """

    _task_config_keys = ()

    @staticmethod
    def _check_backbone(backbone):
        if not isinstance(backbone, BertBackbone):
            raise ValueError(
                "backbone must be a keras_bert_impl.BertBackbone, e.g. BertBackbone.from_preset('bert_tiny'). "
                f"Received: backbone={backbone!r}"
            )

    def get_compile_config(self):
        # An optimizer that never took a step has no state to restore. Leaving the
        # compile config out then lets a loaded head keep the compile of its own
        # __init__; with it, Keras would build the fresh optimizer on load and warn
        # that the saved one (unbuilt: 2 variables) does not match.
        if getattr(self, "optimizer", None) is None or not self.optimizer.built:
            return None
        return super().get_compile_config()

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.layers.serialize(self.backbone),
        }
        config.update({key: getattr(self, key) for key in self._task_config_keys})
        return config

    @classmethod
    def from_config(cls, config):
        check_config_fields(cls, config, extra=("name", "trainable"))
        config = dict(config)
        if isinstance(config["backbone"], dict):
            config["backbone"] = keras.layers.deserialize(config["backbone"])
        return cls(**config)
