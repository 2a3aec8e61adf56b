"""A model rebuilt from its config: another dtype policy, no optimizer state. Keras only, so a
training run on any backend saves its model without it (inference/ is TensorFlow's)."""

import keras


def without_dtypes(config):
    """A model config with every layer's "dtype" entry left out: built from it, every layer
    takes the global dtype policy in force (a saved config pins each layer's own)."""
    if isinstance(config, dict):
        return {k: without_dtypes(v) for k, v in config.items() if k != "dtype"}
    if isinstance(config, list):
        return [without_dtypes(v) for v in config]
    return config


def computes_in(model):
    """The set of compute dtypes of `model`'s layers (a model trained with --precision fp16 or
    bf16 is saved with its mixed policy, and loads computing in float16 or bfloat16)."""
    return {
        layer.dtype_policy.compute_dtype for layer in model._flatten_layers(include_self=True, recursive=True)
    }


def rebuilt(model, policy=None):
    """A copy of `model` from its config, with its weights and vocabulary, without its compile
    state or optimizer. `policy` (e.g. "float32"): every layer built under it instead of the
    dtype policy its config records."""
    config = model.get_config()
    previous = keras.config.dtype_policy()
    if policy is not None:
        config = without_dtypes(config)
        keras.config.set_dtype_policy(policy)
    try:
        # The library's models are functional: built by their constructor, every variable there.
        copy = type(model).from_config(config)
    finally:
        keras.config.set_dtype_policy(previous)
    copy.set_weights(model.get_weights())
    source, target = getattr(model, "backbone", model), getattr(copy, "backbone", copy)
    if getattr(source, "vocabulary", None) is not None:
        target.set_vocabulary(source.vocabulary, lowercase=source.lowercase)
    return copy
