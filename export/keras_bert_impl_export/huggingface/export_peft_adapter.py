"""A LoRA model of this library (`BertBackbone.enable_lora`, `kbert finetune --lora-rank`) as a
PEFT adapter over its base, instead of the merged model `export_huggingface` writes.

Keras' Dense with LoRA computes x @ (kernel + (alpha / r) * a @ b), a [in, r] and b [r, out];
peft's LoRA Linear computes W x + (lora_alpha / r) * B(A(x)) with lora_A.weight [r, in] and
lora_B.weight [out, r] in PyTorch's layout: lora_A = a.T, lora_B = b.T, the same r and alpha,
and the base keeps the kernel without the adapters. The head, trained beside the adapters, is
the adapter's `modules_to_save`, as peft saves a head trained with LoRA.
"""

import os
import re

import keras
import numpy as np

import keras_bert_impl as kb
from keras_bert_impl.atomic_write import write_atomically, write_json_atomically, write_text_atomically
from keras_bert_impl.models import merge_lora
from keras_bert_impl_export.exporter import output_folder
from keras_bert_impl_export.huggingface.export_huggingface import (
    _model_and_run_folder,
    write_transformers_folder,
)
from keras_bert_impl_export.huggingface.model_card import model_card
from keras_bert_impl_export.huggingface.not_expressible_error import NotExpressibleError
from keras_bert_impl_export.huggingface.transformers_model import transformers_model

BASE, ADAPTER = "base", "adapter"
ADAPTER_CONFIG, ADAPTER_WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
# The transformers class -> peft's task_type and the head module it saves whole (modules_to_save).
PEFT_TASKS = {
    "BertModel": ("FEATURE_EXTRACTION", None),
    "BertForSequenceClassification": ("SEQ_CLS", "classifier"),
    "BertForTokenClassification": ("TOKEN_CLS", "classifier"),
    "BertForQuestionAnswering": ("QUESTION_ANS", "qa_outputs"),
}
# The prefix of every key of adapter_model.safetensors: PeftModel -> LoraModel -> the model.
PEFT_PREFIX = "base_model.model."
# A BertBackbone's Dense layer paths -> transformers' module names (without "bert." in a head
# model); `_adapter_modules` checks each against the base's own tensor, so a drift fails loudly.
_MODULES = (
    (r"transformer_layer_(\d+)/attention/(query|key|value)", r"encoder.layer.\1.attention.self.\2"),
    (r"transformer_layer_(\d+)/attention/attention_output", r"encoder.layer.\1.attention.output.dense"),
    (r"transformer_layer_(\d+)/feed_forward/intermediate", r"encoder.layer.\1.intermediate.dense"),
    (r"transformer_layer_(\d+)/feed_forward/output", r"encoder.layer.\1.output.dense"),
    (r"pooler/dense", "pooler.dense"),
)


def _lora_dense_layers(backbone):
    return [
        layer
        for layer in backbone._flatten_layers(include_self=False)
        if isinstance(layer, keras.layers.Dense) and layer.lora_enabled
    ]


def _kernel(layer):
    """The Dense layer's own kernel variable (its `kernel` property adds the adapters)."""
    return next(v for v in layer.weights if v.path == f"{layer.path}/kernel")


def _numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(value), dtype="float32")


def _base_model(model, layers):
    """A copy of `model` without LoRA whose adapted kernels are the unmerged ones."""
    base = merge_lora(model)
    kernels = {_kernel(layer).path: _numpy(_kernel(layer)) for layer in layers}
    for variable in base.weights:
        if variable.path in kernels:
            variable.assign(kernels.pop(variable.path))
    if kernels:
        raise ValueError(f"the model without LoRA has no kernel {sorted(kernels)[0]!r} to unmerge.")
    return base


def _module_name(path, prefix):
    for pattern, template in _MODULES:
        if re.fullmatch(pattern, path):
            return prefix + re.sub(pattern, template, path)
    raise NotExpressibleError(f"the LoRA layer {path!r} has no transformers module name.")


def _adapter_modules(layers, tensors, prefix, notes):
    """{transformers module name: Dense layer} of the LoRA layers the base model holds; each name
    checked against the base's tensor. A LoRA pooler of a token-level head (transformers' class
    has no pooler, and the head never reads it) is left out, with a note."""
    modules = {}
    for layer in layers:
        name = _module_name(layer.path, prefix)
        if name + ".weight" not in tensors and name.endswith("pooler.dense"):
            notes.append("The pooler's LoRA adapter is left out with the pooler: this head does not use it.")
            continue
        if not np.array_equal(tensors.get(name + ".weight"), _numpy(_kernel(layer)).T):
            raise ValueError(f"the LoRA layer {layer.path!r} is not transformers' {name!r} of the base.")
        modules[name] = layer
    return modules


def _adapter_config(settings, task_type, head, modules, base_path):
    """adapter_config.json: peft's LoraConfig fields that say what the tensors mean (peft fills
    the rest with its defaults)."""
    return {
        "peft_type": "LORA",
        "task_type": task_type,
        "base_model_name_or_path": base_path,
        "r": settings["rank"],
        "lora_alpha": settings["alpha"],
        "lora_dropout": 0.0,  # Keras' Dense LoRA has no dropout
        "target_modules": sorted(modules),
        "modules_to_save": [head] if head else None,
        "bias": "none",  # the biases stayed frozen, so they are the base's
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "init_lora_weights": True,
        "inference_mode": True,
        "layers_to_transform": None,
        "layers_pattern": None,
        "rank_pattern": {},
        "alpha_pattern": {},
        "revision": None,
    }


def _adapter_card(described, settings, modules, head, source):
    architecture = described.architecture
    auto = "AutoModel" if architecture == "BertModel" else "AutoModelFor" + architecture[len("BertFor") :]
    return "\n".join(
        [
            "---",
            "library_name: peft",
            "tags: [bert, lora, keras_bert_impl]",
            "---",
            "",
            f"# LoRA adapter ({architecture})",
            "",
            f"Exported by keras_bert_impl (`kbert export --formats huggingface --peft-adapter`) from "
            f"`{os.path.basename(source)}`: rank {settings['rank']}, alpha {settings['alpha']} on "
            f"{', '.join(settings['targets'])} ({len(modules)} modules)"
            + (f", and the trained `{head}` head (modules_to_save)." if head else "."),
            "The base model is the folder `../base`.",
            "",
            "```python",
            "from peft import PeftModel",
            f"from transformers import AutoTokenizer, {auto}",
            "",
            'tokenizer = AutoTokenizer.from_pretrained("OUTPUT/base")',
            f'model = PeftModel.from_pretrained({auto}.from_pretrained("OUTPUT/base"), "OUTPUT/adapter")',
            "```",
            "",
        ]
    )


def export_peft_adapter(model, output, *, overwrite=False, source=None):
    """Writes a LoRA model as OUTPUT/base, the transformers folder of the model without its
    adapters (the encoder's own weights; a head model's config with its labels, its head left
    to the adapter), and OUTPUT/adapter, the PEFT LoRA folder (adapter_config.json,
    adapter_model.safetensors, README.md) that
    `peft.PeftModel.from_pretrained(AutoModelFor...from_pretrained(OUTPUT/base), OUTPUT/adapter)`
    loads to answer as `model` does. OUTPUT appears whole or not at all.

    Args:
        model: a keras_bert_impl model with LoRA (a backbone, classifier, tagger or span
            labeler; see `transformers_model`), its `.keras` file or its kbert run folder.
        output: the folder to create; an existing non-empty one is refused unless `overwrite`.
        overwrite: replace `output`.
        source: the model's file name in the model cards (default: the path given, or the class).
    Returns:
        the `TransformersModel` of the base.
    """
    from safetensors.numpy import save_file

    model, loaded_from, _ = _model_and_run_folder(model)
    backbone = model if isinstance(model, kb.BertBackbone) else getattr(model, "backbone", None)
    settings = getattr(backbone, "lora_settings", None)
    if settings is None:
        raise ValueError(
            f"the {type(model).__name__} has no LoRA adapters (BertBackbone.enable_lora, kbert finetune "
            "--lora-rank): export it as a transformers folder, without the PEFT adapter."
        )
    layers = _lora_dense_layers(backbone)
    described = transformers_model(_base_model(model, layers))  # refuses before anything is written
    if described.architecture not in PEFT_TASKS:
        raise NotExpressibleError(
            f"peft has no task for a {described.architecture} with LoRA: export its merged weights instead."
        )
    task_type, head = PEFT_TASKS[described.architecture]
    prefix = "" if described.architecture == "BertModel" else "bert."
    modules = _adapter_modules(layers, described.tensors, prefix, described.notes)
    adapter = {}
    for name, layer in modules.items():
        adapter[f"{PEFT_PREFIX}{name}.lora_A.weight"] = np.ascontiguousarray(_numpy(layer.lora_kernel_a).T)
        adapter[f"{PEFT_PREFIX}{name}.lora_B.weight"] = np.ascontiguousarray(_numpy(layer.lora_kernel_b).T)
    for name in [n for n in described.tensors if head and n.startswith(head + ".")]:
        adapter[PEFT_PREFIX + name] = described.tensors.pop(name)
    if head:
        described.notes.append(
            f"This is the base of the PEFT adapter in ../{ADAPTER}: the encoder without its LoRA adapters, "
            f"and no `{head}` weights (the adapter holds the trained ones; transformers initialises this "
            "folder's at random): load the adapter over it with peft's PeftModel.from_pretrained."
        )
    source = source or loaded_from or type(model).__name__
    with output_folder(output, overwrite) as work:
        base_path = os.path.abspath(os.path.join(output, BASE))
        write_transformers_folder(
            os.path.join(work, BASE), described, backbone, model_card(described, source)
        )
        folder = os.path.join(work, ADAPTER)
        os.makedirs(folder)
        config = _adapter_config(settings, task_type, head, modules, base_path)
        write_json_atomically(config, os.path.join(folder, ADAPTER_CONFIG), indent=2)
        write_atomically(
            os.path.join(folder, ADAPTER_WEIGHTS),
            lambda tmp: save_file(adapter, tmp, metadata={"format": "pt"}),
        )
        card = _adapter_card(described, settings, modules, head, source)
        write_text_atomically(card, os.path.join(folder, "README.md"))
    return described
