"""Keras' own `model.quantize(mode)` on our models, kept through save and load.

`keras.Model.quantize("int8")` swaps each leaf Dense/Embedding's float weights for int8
ones and gives the layer a quantized dtype policy. A plain Functional model saves every
layer's config, policy included, so it loads back quantized. Our models rebuild their
layers from their own constructor arguments (BertBackbone's sizes, a head's backbone),
so without help the rebuilt sublayers are float ones and loading stops at "Layer
'segment_embedding' expected 1 variables, but received 2".

The help: `get_config` records the quantized policy of each quantized layer under its
path, and `from_config` gives those policies back:
- a backbone is constructed with a `keras.dtype_policies.DTypePolicyMap` of them (Keras' own
  mechanism, as KerasHub's backbones use it): every sublayer receives the map as its dtype,
  looks its own path up when it is built, and is built quantized, int8 variables of the
  saved shapes with no float weights made first;
- a head's few layers (a classifier's `logits`) are quantized after construction through
  Keras' `dtype_policy` setter. It quantizes a built layer's weights in place, and Keras
  calls `gc.collect()` for each variable it replaces (0.23 s each in a fresh process), so
  that path is kept for the handful of head layers.
"""

import keras

from keras_bert_impl.models.config_fields import check_config_fields

QUANTIZED_LAYERS = "quantized_layers"


def quantization_modes(model):
    """The sorted modes ("int8", ...) of `model`'s quantized layers; empty for a float model."""
    return sorted({layer.quantization_mode for layer in model._flatten_layers() if layer.quantization_mode})


def quantized_layer_policies(model, exclude=None):
    """{layer path: serialized dtype policy} of `model`'s quantized layers.

    `exclude`: a model whose layers are left out (a head's backbone, which records its own).
    """
    skipped = {id(layer) for layer in exclude._flatten_layers()} if exclude is not None else set()
    return {
        layer.path: keras.dtype_policies.serialize(layer.dtype_policy)
        for layer in model._flatten_layers(include_self=False)
        if id(layer) not in skipped and layer.quantization_mode is not None
    }


def record_quantized_layers(config, model, exclude=None):
    """`config` (a get_config dict) with `model`'s quantized layer policies under QUANTIZED_LAYERS,
    when it has any (after model.quantize(...)); `exclude` as in quantized_layer_policies."""
    quantized = quantized_layer_policies(model, exclude=exclude)
    if quantized:
        config[QUANTIZED_LAYERS] = quantized
    return config


def split_quantized_config(cls, config):
    """(constructor arguments, recorded quantized policies or None) of a from_config dict, its
    fields checked against `cls`'s constructor."""
    check_config_fields(cls, config, extra=("name", "trainable", "dtype", QUANTIZED_LAYERS))
    config = dict(config)
    return config, config.pop(QUANTIZED_LAYERS, None)


def _deserialize_policies(cls, policies):
    if not isinstance(policies, dict):
        raise ValueError(
            f"{cls.__name__} config field '{QUANTIZED_LAYERS}' must map layer paths to dtype "
            f"policies. Received: {policies!r}. Fix the config JSON, or save the model again."
        )
    return {
        path: keras.dtype_policies.deserialize(policy)
        if isinstance(policy, dict)
        else keras.dtype_policies.get(policy)
        for path, policy in policies.items()
    }


def _layers_by_path(model, policies):
    """{path: layer} of `model`; refuses policies naming a path it does not have."""
    layers = {layer.path: layer for layer in model._flatten_layers(include_self=False) if layer.path}
    unknown = sorted(set(policies) - set(layers))
    if unknown:
        raise ValueError(
            f"{type(model).__name__} config lists quantized layers that the model does not have: {unknown}. "
            f"Its layers are: {sorted(layers)}. The config was written for another architecture."
        )
    return layers


def build_with_quantized_layers(cls, config, policies):
    """`cls(**config)` with the layers named in `policies` (as written by
    `quantized_layer_policies`) built quantized, through a `DTypePolicyMap` given as the
    model's dtype. The model's own dtype policy is the config's afterwards (the map lives
    on in its sublayers), so its config and `dtype_policy` read as before."""
    policies = _deserialize_policies(cls, policies)
    default = config.get("dtype")
    default = keras.dtype_policies.get(default) if default is not None else keras.config.dtype_policy()
    model = cls(**{**config, "dtype": keras.dtype_policies.DTypePolicyMap(default, policies)})
    model._dtype_policy = default  # no public way to replace a map without editing it
    _layers_by_path(model, policies)
    return model


def restore_quantized_layers(model, policies):
    """Quantizes the layers of a freshly built `model` named in `policies` (as written by
    `quantized_layer_policies`), so that saved int8 weights fit them: for a head's few
    layers (see the module docstring)."""
    if not policies:
        return
    policies = _deserialize_policies(type(model), policies)
    layers = _layers_by_path(model, policies)
    for path, policy in policies.items():
        layers[path].dtype_policy = policy
