"""Keras' own `model.quantize(mode)` on our models, kept through save and load.

`keras.Model.quantize("int8")` swaps each leaf Dense/Embedding's float weights for int8
ones and gives the layer a quantized dtype policy. A plain Functional model saves every
layer's config, policy included, so it loads back quantized. Our models rebuild their
layers from their own constructor arguments (BertBackbone's sizes, a head's backbone),
so without help the rebuilt sublayers are float ones and loading stops at "Layer
'segment_embedding' expected 1 variables, but received 2".

The help: `get_config` records the quantized policy of each quantized layer under its
path (the same path Keras' own `DTypePolicyMap` uses), and `from_config` gives those
policies back to the rebuilt layers. Setting a quantized policy on a built layer is
Keras' documented way to quantize it, so the layer then holds int8 variables of the
saved shapes, and the saved values are loaded into them.
"""

import keras

QUANTIZED_LAYERS = "quantized_layers"


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


def restore_quantized_layers(model, policies):
    """Quantizes the layers of a freshly built `model` named in `policies` (as written by
    `quantized_layer_policies`), so that saved int8 weights fit them."""
    if not policies:
        return
    if not isinstance(policies, dict):
        raise ValueError(
            f"{type(model).__name__} config field '{QUANTIZED_LAYERS}' must map layer paths to dtype "
            f"policies. Received: {policies!r}. Fix the config JSON, or save the model again."
        )
    layers = {layer.path: layer for layer in model._flatten_layers(include_self=False) if layer.path}
    unknown = sorted(set(policies) - set(layers))
    if unknown:
        raise ValueError(
            f"{type(model).__name__} config lists quantized layers that the model does not have: {unknown}. "
            f"Its layers are: {sorted(layers)}. The config was written for another architecture."
        )
    for path, policy in policies.items():
        layers[path].dtype_policy = keras.dtype_policies.deserialize(policy)

