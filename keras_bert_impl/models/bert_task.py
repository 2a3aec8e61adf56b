"""Shared plumbing for models that wrap a `BertBackbone` (heads)."""

import keras

from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models._early_attributes import set_attribute
from keras_bert_impl.models.quantized_layers import record_quantized_layers, restore_quantized_layers, split_quantized_config


class BertTask(keras.Model):
    """Base of the BERT heads: holds the backbone, serialises it in the config,
    and rebuilds the head around it on load (so tied weights stay tied).

    Subclasses build their functional graph, call `super().__init__(inputs=...,
    outputs=..., **kwargs)`, set their own config attributes and list them in
    `_task_config_keys`.
    """

    _task_config_keys = ()
    # The learning rate of the "auto" optimizer (Adam): fine-tuning's usual 5e-5.
    default_learning_rate = 5e-5

    def __setattr__(self, name, value):
        # Layers are attributes before keras.Model.__init__ (see models/_early_attributes.py).
        set_attribute(self, name, value, super().__setattr__)

    def default_loss(self):
        """The loss `compile(loss="auto")` uses (None: the head does not train)."""
        return None

    def default_metrics(self):
        """The metrics `compile(metrics="auto")` uses."""
        return None

    def default_weighted_metrics(self):
        """The weighted metrics `compile(weighted_metrics="auto")` uses."""
        return None

    def compile(self, optimizer="auto", loss="auto", metrics="auto", weighted_metrics="auto", **kwargs):
        """Keras' `compile`, where "auto" (the default of each) is the head's own choice:
        Adam at `default_learning_rate`, and the loss and metrics that fit its outputs
        (KerasHub's Task.compile pattern). Pass anything else to override one of them.
        """

        def auto(value):
            return isinstance(value, str) and value == "auto"

        super().compile(
            optimizer=keras.optimizers.Adam(self.default_learning_rate) if auto(optimizer) else optimizer,
            loss=self.default_loss() if auto(loss) else loss,
            metrics=self.default_metrics() if auto(metrics) else metrics,
            weighted_metrics=self.default_weighted_metrics() if auto(weighted_metrics) else weighted_metrics,
            **kwargs,
        )

    @staticmethod
    def _check_backbone(backbone):
        if not isinstance(backbone, BertBackbone):
            raise ValueError(
                "backbone must be a keras_bert_impl.BertBackbone, e.g. BertBackbone.from_preset('bert_tiny'). "
                f"Received: backbone={backbone!r}"
            )

    def _output_layers(self, backbone, num_classes, dropout, activation=None):
        """Sets the backbone and the head's dropout and `logits` Dense (before Model.__init__,
        which the head calls on the graph they make). The Dense computes in float32: logits
        and probabilities in float32 keep the loss stable under mixed precision."""
        self.backbone = backbone
        self.output_dropout = keras.layers.Dropout(dropout, name="output_dropout", dtype=backbone.dtype_policy)
        self.output_dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=backbone.initializer_range),
            activation=activation,
            dtype="float32",
            name="logits",
        )

    def compile_from_config(self, config):
        # Keras skips (with a warning) the compile of a loaded model whose class overrides
        # compile; ours takes the same arguments as Keras', so a saved compile is replayed.
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def get_compile_config(self):
        # An optimizer that never took a step has no state to restore. Leaving the
        # compile config out then lets a loaded head keep the compile of its own
        # __init__; with it, Keras would build the fresh optimizer on load and warn
        # that the saved one (unbuilt: 2 variables) does not match.
        if getattr(self, "optimizer", None) is None or not self.optimizer.built:
            return None
        return super().get_compile_config()

    def get_config(self):
        config = super().get_config()
        config.update({"backbone": keras.layers.serialize(self.backbone)})
        config.update({key: getattr(self, key) for key in self._task_config_keys})
        # The head's own quantized layers (the backbone's are in its config).
        return record_quantized_layers(config, self, exclude=self.backbone)

    @classmethod
    def from_config(cls, config):
        config, quantized = split_quantized_config(cls, config)
        if isinstance(config["backbone"], dict):
            config["backbone"] = keras.layers.deserialize(config["backbone"])
        task = cls(**config)
        restore_quantized_layers(task, quantized)
        return task
