"""Many LoRA classifiers made from one base, run over one copy of its backbone.

Each classifier fine-tuned with `BertBackbone.enable_lora` differs from its base only by its
adapters (a [in, r] and b [r, out] per target Dense) and its head: LoRA freezes every other
backbone weight. `LoraAdapterBank` keeps the base backbone once and, per adapter, only those
matrices and the head's kernel and bias; each target Dense computes
x W + bias + (x a_i) (scale_i b_i) for row i's adapter, so one backbone call serves rows of
different adapters, and every row answers as its own classifier merged by `merge_lora` does
(up to float32 rounding: the merged kernel adds scale a b before the product).

The classifiers share a base when their backbone configs (LoRA settings aside), vocabularies
and every non-adapter backbone weight are equal, value for value. Runs record no fingerprint
of their base; LoRA leaves those weights bitwise as the base had them, so comparing them is
exact, and it costs one pass over the weights at load time.
"""

import threading

import keras
import numpy as np
from keras import ops

from keras_bert_impl.layers.masking import masked_mean
from keras_bert_impl.layers.multi_head_attention import MultiHeadAttention
from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.lora import lora_dense_layers, lora_layers
from keras_bert_impl.tensor_names import MODEL_ID_INPUTS

_ADAPTERS = ("lora_kernel_a", "lora_kernel_b")


def _base_weights(backbone):
    """{weight path: variable} of `backbone` without its adapters, LoRA kernels unmerged."""
    adapted = {id(layer._kernel): layer for layer in lora_layers(backbone).values()}
    adapters = {id(getattr(layer, name)) for layer in adapted.values() for name in _ADAPTERS}
    return {variable.path: variable for variable in backbone.weights if id(variable) not in adapters}


def _base_config(backbone):
    """The backbone's config without its LoRA settings and its name (Keras numbers a second
    backbone's name, and a name changes no weight)."""
    return {k: v for k, v in backbone.get_config().items() if k not in ("lora", "name")}


def _adapter(classifier, index):
    backbone = getattr(classifier, "backbone", None)
    if not isinstance(classifier, BertClassifier) or not lora_layers(backbone):
        raise ValueError(
            f"classifiers[{index}]: a {type(classifier).__name__} without LoRA adapters; the bank serves "
            "BertClassifiers fine-tuned with LoRA (kbert finetune --lora-rank)."
        )
    if backbone.dtype_policy.name != "float32":
        raise ValueError(
            f"classifiers[{index}]: its backbone computes in {backbone.dtype_policy.name!r}; the bank runs "
            "float32 models."
        )
    matrices = {
        path: (
            keras.ops.convert_to_numpy(layer.lora_kernel_a).astype("float32"),
            (layer.lora_alpha / layer.lora_rank)
            * keras.ops.convert_to_numpy(layer.lora_kernel_b).astype("float32"),
        )
        for path, layer in lora_layers(backbone).items()
    }
    dense = classifier.output_dense
    head = {
        "kernel": keras.ops.convert_to_numpy(dense.kernel),
        "bias": keras.ops.convert_to_numpy(dense.bias),
        "pooling": classifier.pooling,
        "activation": dense.activation,  # the output layer's own function (linear, softmax, sigmoid)
        "output": "logits" if classifier.activation is None else "probabilities",
        "label_names": classifier.label_names,
        "config": {  # the head's BertClassifier arguments
            key: getattr(classifier, key)
            for key in ("num_classes", "multi_label", "activation", "dropout", "label_names", "pooling")
        },
    }
    return matrices, head


def _unfused(attend_flat):
    """`MultiHeadAttention.attend_flat` calling its query, key and value layers: on self-attention
    it multiplies by their three kernels at once, which would skip the adapters' calls."""

    def attend(query, *, key=None, value=None, **kwargs):
        if key is None and value is None:
            key = value = query
        return attend_flat(query, key=key, value=value, **kwargs)

    return attend


class LoraAdapterBank:
    """LoRA `BertClassifier`s of one base over one backbone: `run` takes rows of any of them.

    Args:
        classifiers: an iterable of `BertClassifier`s whose backbones have LoRA enabled, made
            from the same base (see the module docstring). Read once, in order: a generator
            that loads each in turn keeps one full model in memory at a time.

    Attributes:
        backbone: the base `BertBackbone` (no LoRA), its vocabulary set.
        heads: per adapter, {"output": "logits" or "probabilities", "label_names", "pooling",
            "activation" (the output layer's function), "kernel", "bias", "config" (the
            BertClassifier arguments of its head: a classifier on `backbone` with them takes
            the adapter's inputs and gives its outputs' names and labels)}.

    Raises ValueError, one line naming the classifier, where one has no LoRA or another base.
    """

    def __init__(self, classifiers):
        self.backbone, self.heads, adapters = None, [], []
        for index, classifier in enumerate(classifiers):
            matrices, head = _adapter(classifier, index)
            if self.backbone is None:
                self._build_base(classifier.backbone)
            else:
                self._check_base(classifier.backbone, index)
            adapters.append(matrices)
            self.heads.append(head)
            del classifier  # before the iterable loads the next one
        if not adapters:
            raise ValueError("classifiers: none given; the bank needs at least one LoRA classifier.")
        self._stack(adapters)
        self._rows = None  # [B] adapter of each row, read by the target Dense layers during `run`
        self._lock = threading.Lock()

    def __len__(self):
        return len(self.heads)

    def _build_base(self, source):
        config = _base_config(source)
        self.backbone = BertBackbone.from_config(config)
        weights = _base_weights(source)
        for variable in self.backbone.weights:  # one at a time: no second copy of the model
            variable.assign(weights[variable.path])
        if source.vocabulary is not None:
            self.backbone.set_vocabulary(source.vocabulary, lowercase=source.lowercase)
        self._config = config

    def _check_base(self, backbone, index):
        config = _base_config(backbone)
        weights = _base_weights(backbone)
        base = {v.path: v for v in self.backbone.weights}
        differs = None
        if config != self._config:
            differs = "its backbone config"
        elif (backbone.vocabulary, backbone.lowercase) != (self.backbone.vocabulary, self.backbone.lowercase):
            differs = "its vocabulary"
        else:
            differs = next(
                (
                    f"weight {path!r}"
                    for path, variable in weights.items()
                    if not np.array_equal(
                        keras.ops.convert_to_numpy(variable), keras.ops.convert_to_numpy(base[path])
                    )
                ),
                None,
            )
        if differs is not None:
            raise ValueError(
                f"classifiers[{index}] was not made from the same base as classifiers[0] ({differs} "
                "differs): serve adapters of one base model together, and those of another base apart."
            )

    def _stack(self, adapters):
        """Per target Dense, every adapter's a and scaled b stacked ([N, in, r], [N, r, out]),
        ranks padded with zeros and zeros for an adapter that leaves the layer as it is."""
        layers = lora_dense_layers(self.backbone)
        paths = sorted({path for matrices in adapters for path in matrices})
        rank = max(a.shape[1] for matrices in adapters for a, _ in matrices.values())
        self._stacks = {}
        for path in paths:
            kernel = layers[path].kernel
            a_stack = np.zeros((len(adapters), kernel.shape[0], rank), "float32")
            b_stack = np.zeros((len(adapters), rank, kernel.shape[1]), "float32")
            for i, matrices in enumerate(adapters):
                if path in matrices:
                    a, b = matrices[path]
                    a_stack[i, :, : a.shape[1]], b_stack[i, : b.shape[0]] = a, b
            self._stacks[path] = (ops.convert_to_tensor(a_stack), ops.convert_to_tensor(b_stack))
            # Untracked (set past Keras' tracker): the layer's weights and config stay the base's.
            object.__setattr__(layers[path], "call", self._adapted_call(layers[path], path))
        adapted = {id(layers[path]) for path in paths}
        for layer in self.backbone._flatten_layers(include_self=False):
            projections = (getattr(layer, f"{n}_dense", None) for n in ("query", "key", "value"))
            if isinstance(layer, MultiHeadAttention) and any(id(p) in adapted for p in projections):
                object.__setattr__(layer, "attend_flat", _unfused(layer.attend_flat))

    def _adapted_call(self, layer, path):
        def call(inputs, training=None):
            outputs = ops.matmul(inputs, layer.kernel)
            if self._rows is not None:  # else the base's own layer (a head built on the backbone)
                a, b = (ops.take(stack, self._rows, axis=0) for stack in self._stacks[path])
                # The inputs' leading axes hold the rows first: [B, in], [B, S, in], or the attention's
                # [B * S, in] (its projections run on the flattened tokens).
                rows = ops.shape(self._rows)[0]
                low = ops.einsum("bti,bir->btr", ops.reshape(inputs, (rows, -1, inputs.shape[-1])), a)
                outputs += ops.reshape(ops.einsum("btr,bro->bto", low, b), (*ops.shape(inputs)[:-1], -1))
            if layer.bias is not None:
                outputs = outputs + layer.bias
            return layer.activation(outputs) if layer.activation is not None else outputs

        return call

    def run(self, requests):
        """Runs [(adapter index, {"token_ids", "segment_ids", "padding_mask"}: int32 [B_k, S])]
        as one backbone call; returns, per request, {output: numpy [B_k, C]} of its adapter's
        head ("logits" or "probabilities"). Requests must share S. Thread-safe: calls take turns."""
        for adapter, _ in requests:
            if not (isinstance(adapter, (int, np.integer)) and 0 <= adapter < len(self)):
                raise ValueError(f"adapter must be an index in [0, {len(self)}). Received: {adapter!r}")
        inputs = {
            n: np.concatenate([np.asarray(x[n], "int32") for _, x in requests]) for n in MODEL_ID_INPUTS
        }
        sizes = [len(x["token_ids"]) for _, x in requests]
        rows = np.repeat([adapter for adapter, _ in requests], sizes).astype("int32")
        with self._lock:
            outputs = self.forward(inputs, ops.convert_to_tensor(rows))
        answers, start = [], 0
        for (adapter, _), size in zip(requests, sizes):
            part = slice(start, start + size)
            answers.append(self._head(adapter, outputs, inputs["padding_mask"][part], part))
            start += size
        return answers

    def forward(self, inputs, rows):
        """The backbone's outputs on `inputs` ({"token_ids", "segment_ids", "padding_mask"}: int32
        [B, S]), row i through adapter `rows[i]` (int32 [B]); `run` calls it, one call at a time.
        Plain Python around the layers, so a backend's compiler may wrap it (the serving wing
        replaces it with a `tf.function` of it: run eagerly, the backbone took 1.5 times the
        graph's time on MiniLM)."""
        self._rows = rows  # read by the target Dense layers while the backbone runs (or is traced)
        try:
            return self.backbone(inputs)
        finally:
            self._rows = None

    def _head(self, adapter, outputs, padding_mask, part):
        head = self.heads[adapter]
        if head["pooling"] == "pooled":
            pooled = outputs["pooled_output"][part]
        else:
            pooled = masked_mean(outputs["sequence_output"][part], padding_mask)
        values = head["activation"](ops.matmul(pooled, head["kernel"]) + head["bias"])
        return {head["output"]: keras.ops.convert_to_numpy(values)}
