"""LoRA on a BertBackbone through Keras' own `Dense.enable_lora`, kept through save and load,
and folded back into plain Dense kernels for export.

Keras' `Dense.enable_lora(rank)` adds `lora_kernel_a` [in, r] (he_uniform) and
`lora_kernel_b` [r, out] (zeros) and computes `kernel + (lora_alpha / rank) * a @ b`.
Its `save_own_variables` writes that merged kernel and never a or b, and its
`load_own_variables` zeroes a and b: a LoRA model reloaded from a .keras file would answer
the same but keep no adapters, and with a = b = 0 neither gets a gradient, so training it
further moves nothing. `LoraWeights` (an untracked attribute of the backbone, so Keras'
saving visits it after the model's layers) writes each target's unmerged kernel, a and b,
and puts them back after the layers have loaded: the round trip is exact.
"""

import keras
import numpy as np

from keras_bert_impl.models.model_copy import built_with_weights, copy_vocabulary
from keras_bert_impl.validation import check_positive_int

# KerasHub's `Backbone.enable_lora` targets the query and value projections by default.
DEFAULT_LORA_TARGETS = ("query", "value")
# The names of a BertBackbone's Dense layers, each a target of every layer of that name: the
# attention's projections, the feed-forward's two and the pooler's (tests/models/test_lora.py
# holds this to the layers a backbone builds).
LORA_TARGET_NAMES = ("query", "key", "value", "attention_output", "intermediate", "output", "dense")
# The attribute holding the LoraWeights; set past Keras' tracker (see enable_backbone_lora).
_STATE_ATTRIBUTE = "_lora_weights"


def lora_dense_layers(backbone):
    """{path: Dense} of every Dense layer of `backbone` (its encoder's projections and the pooler's)."""
    return {
        layer.path: layer
        for layer in backbone._flatten_layers(include_self=False)
        if isinstance(layer, keras.layers.Dense)
    }


def _targets_list(targets):
    if isinstance(targets, str):
        targets = [targets]
    targets = list(targets) if targets is not None else []
    if not targets or not all(isinstance(t, str) and t for t in targets):
        raise ValueError(
            f"targets must be a non-empty list of Dense layer names such as {list(DEFAULT_LORA_TARGETS)}. "
            f"Received: targets={targets!r}"
        )
    return targets


def _matching_layers(backbone, targets):
    """{path: Dense} of the layers `targets` name: a layer name ("query", every layer's query
    projection) or a path ("transformer_layer_0/attention/query"); each must name one."""
    layers = lora_dense_layers(backbone)
    chosen = {}
    for target in _targets_list(targets):
        found = {path: layer for path, layer in layers.items() if target in (layer.name, path)}
        if not found:
            names = sorted({layer.name for layer in layers.values()})
            raise ValueError(
                f"targets: {target!r} names no Dense layer of the backbone. Choose among {names}, or a "
                f"path such as {next(iter(layers))!r}."
            )
        chosen.update(found)
    return chosen


def enable_backbone_lora(backbone, rank, targets=DEFAULT_LORA_TARGETS, alpha=None):
    """Enables LoRA of `rank` on the Dense layers of `backbone` that `targets` names and
    freezes every other backbone variable (kernels, biases, embeddings, layer norms). See
    `BertBackbone.enable_lora`."""
    rank = check_positive_int("rank", rank)
    alpha = check_positive_int("alpha", alpha, allow_none=True)
    if getattr(backbone, _STATE_ATTRIBUTE, None) is not None:
        raise ValueError(
            f"LoRA is already enabled on this backbone (rank {backbone.lora_settings['rank']}): enable it "
            "once, on a backbone built without it."
        )
    quantized = sorted(
        {layer.quantization_mode for layer in backbone._flatten_layers() if layer.quantization_mode}
    )
    if quantized:
        raise ValueError(
            f"Cannot enable LoRA on a quantized backbone ({', '.join(quantized)}): enable it on the float "
            "model, and quantize its merged export."
        )
    layers = _matching_layers(backbone, targets)
    for layer in layers.values():
        layer.enable_lora(rank, lora_alpha=alpha)
    settings = {
        "rank": rank,
        "alpha": alpha if alpha is not None else rank,
        "targets": _targets_list(targets),
    }
    # Untracked, so it adds no layer or variable to the model; Keras' saving still finds it by
    # attribute, after the layers it holds.
    object.__setattr__(backbone, _STATE_ATTRIBUTE, LoraWeights(layers, settings))
    freeze_all_but_adapters(backbone)


def freeze_all_but_adapters(backbone):
    """Makes only the LoRA adapters of `backbone` trainable (nothing without LoRA). Biases stay
    frozen too, as PEFT's default. Keras' `trainable = True` on a model (which a functional
    model's constructor sets from its config, so a head loaded from a .keras file sets it on its
    backbone) makes every variable trainable again: BertBackbone's setter calls this after it."""
    adapters = {
        id(variable)
        for layer in lora_layers(backbone).values()
        for variable in (layer.lora_kernel_a, layer.lora_kernel_b)
    }
    if not adapters:
        return
    for variable in backbone.variables:
        variable.trainable = id(variable) in adapters


def lora_settings(backbone):
    """{"rank", "alpha", "targets"} of a LoRA backbone, or None."""
    state = getattr(backbone, _STATE_ATTRIBUTE, None)
    return dict(state.settings) if state is not None else None


def lora_layers(backbone):
    """{path: Dense} of the layers carrying LoRA adapters ({} without LoRA)."""
    state = getattr(backbone, _STATE_ATTRIBUTE, None)
    return dict(state.layers_by_path) if state is not None else {}


def merged_kernel(layer):
    """The Dense `layer`'s kernel with its adapters folded in, as Keras' forward computes it:
    kernel + (lora_alpha / lora_rank) * lora_kernel_a @ lora_kernel_b, in float32."""
    kernel = keras.ops.convert_to_numpy(layer._kernel).astype("float32")
    a = keras.ops.convert_to_numpy(layer.lora_kernel_a).astype("float32")
    b = keras.ops.convert_to_numpy(layer.lora_kernel_b).astype("float32")
    return kernel + (layer.lora_alpha / layer.lora_rank) * (a @ b)


class LoraWeights(keras.layers.Layer):
    """The unmerged kernel and adapters of a backbone's LoRA layers in its saved files (see the
    module docstring). Holds no variable of its own."""

    def __init__(self, layers, settings, **kwargs):
        super().__init__(name="lora_weights", **kwargs)
        # Plain attributes: tracked, the layers would count twice in the model's weights.
        object.__setattr__(self, "layers_by_path", dict(layers))
        object.__setattr__(self, "settings", dict(settings))
        self.built = True

    @staticmethod
    def _key(path, name):
        return f"{path.replace('/', '.')}.{name}"  # "/" in an h5 key would open a group

    def save_own_variables(self, store):
        for path, layer in self.layers_by_path.items():
            store[self._key(path, "kernel")] = keras.ops.convert_to_numpy(layer._kernel)
            store[self._key(path, "lora_kernel_a")] = keras.ops.convert_to_numpy(layer.lora_kernel_a)
            store[self._key(path, "lora_kernel_b")] = keras.ops.convert_to_numpy(layer.lora_kernel_b)

    def load_own_variables(self, store):
        for path, layer in self.layers_by_path.items():
            for name, variable in (
                ("kernel", layer._kernel),
                ("lora_kernel_a", layer.lora_kernel_a),
                ("lora_kernel_b", layer.lora_kernel_b),
            ):
                key = self._key(path, name)
                if key not in store:
                    raise ValueError(
                        f"The saved model has no LoRA weight {key!r}: it was saved without LoRA on "
                        f"{path!r} (another rank or targets). Load it with the LoRA settings it was "
                        "saved with."
                    )
                variable.assign(np.asarray(store[key]))


def _without_lora(config):
    """A model config with the LoRA settings of every BertBackbone in it left out."""
    if isinstance(config, list):
        return [_without_lora(item) for item in config]
    if not isinstance(config, dict):
        return config
    config = {key: _without_lora(value) for key, value in config.items()}
    if config.get("class_name") == "BertBackbone" and isinstance(config.get("config"), dict):
        config["config"] = {k: v for k, v in config["config"].items() if k != "lora"}
    return config


def merge_lora(model):
    """A copy of `model` (a BertBackbone, or a head holding one as `backbone`) without LoRA:
    each adapted Dense is a plain one whose kernel is kernel + (alpha / rank) * a @ b (the
    matrix Keras' forward multiplies by), every other weight, the vocabulary and the labels
    as they are. Its outputs equal `model`'s in float32 up to rounding; export writes from it.
    Not compiled."""
    backbone = getattr(model, "backbone", model)
    layers = lora_layers(backbone)
    if not layers:
        raise ValueError(
            f"merge_lora: the {type(model).__name__} has no LoRA adapters (BertBackbone.enable_lora) to "
            "merge."
        )
    merged = {id(layer._kernel): merged_kernel(layer) for layer in layers.values()}
    adapters = {id(v) for layer in layers.values() for v in (layer.lora_kernel_a, layer.lora_kernel_b)}
    values = {
        v.path: merged[id(v)] if id(v) in merged else keras.ops.convert_to_numpy(v)
        for v in model.weights
        if id(v) not in adapters
    }
    config = model.get_config()
    config = {k: v for k, v in config.items() if k != "lora"} if model is backbone else _without_lora(config)

    def set_weights(copy):
        if sorted(v.path for v in copy.weights) != sorted(values):
            raise ValueError(
                f"merge_lora: the {type(model).__name__} rebuilt without LoRA has other weights than the "
                "original (a model whose layers are not all built by its config)."
            )
        for variable in copy.weights:
            variable.assign(values[variable.path])

    copy = built_with_weights(lambda: type(model).from_config(config), set_weights)
    copy_vocabulary(model, copy)
    return copy
