"""The compile every head shares: "auto" is the head's own optimizer, loss and metrics."""

import keras


class HeadCompile:
    """Mixin for a keras.Model head (before keras.Model in its bases): `compile`'s "auto"
    (the default of each argument) is Adam at `default_learning_rate` and the loss and
    metrics the head names in `default_loss` / `default_metrics` / `default_weighted_metrics`
    (KerasHub's Task.compile pattern), and a saved compile is replayed on load.

    A mixin, not a base class: Keras rewrites the bases of a functional model's class to
    put `Functional` in (`inject_functional_model_class`), so `BertTask` is functional once
    a head is built; a subclassed head (`QuantizationAwareClassifier`) shares this part only.
    """

    # The learning rate of the "auto" optimizer (Adam): fine-tuning's usual 5e-5.
    default_learning_rate = 5e-5

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
