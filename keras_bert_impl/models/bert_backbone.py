"""The BERT encoder: embeddings, a stack of post-LN Transformer blocks, pooler.

Shape legend: B batch, T sequence length, H hidden size, L layers, N heads.
"""

import json
import os

import keras
import numpy as np
from keras import ops

from keras_bert_impl.atomic_write import write_json_atomically
from keras_bert_impl.layers.activations import ACTIVATIONS
from keras_bert_impl.tensor_names import MODEL_ID_INPUTS
from keras_bert_impl.layers.bert_embeddings import POSITION_EMBEDDINGS, BertEmbeddings
from keras_bert_impl.layers.bert_pooler import BertPooler
from keras_bert_impl.layers.transformer_encoder import TransformerEncoder
from keras_bert_impl.models._checked_data import ChecksIdData
from keras_bert_impl.models._early_attributes import set_attribute
from keras_bert_impl.models.lora import (
    DEFAULT_LORA_TARGETS,
    enable_backbone_lora,
    freeze_all_but_adapters,
    lora_settings,
)
from keras_bert_impl.models.presets import BERT_PRESETS
from keras_bert_impl.models.quantized_layers import (
    build_with_quantized_layers,
    record_quantized_layers,
    split_quantized_config,
)
from keras_bert_impl.tokenization.vocabulary import load_vocabulary_asset, save_vocabulary_asset
from keras_bert_impl.validation import (
    check_bool,
    check_choice,
    check_divisible,
    check_positive_int,
    check_probability,
)

# The casing that goes with the vocabulary (the vocabulary itself is tokenization's
# VOCAB_ASSET), in the .keras file's assets.
TOKENIZER_ASSET = "tokenizer.json"
# The config field of a LoRA backbone's settings (absent without LoRA).
_LORA = "lora"


def _concrete(x):
    """The value of `x` as numpy when it has one (eager call), else None (symbolic)."""
    if isinstance(x, np.ndarray):
        return x
    if keras.backend.is_keras_tensor(x):
        return None
    try:
        return keras.ops.convert_to_numpy(x)
    except Exception:  # a symbolic tensor inside a traced function
        return None


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertBackbone(ChecksIdData, keras.Model):
    """BERT encoder with named dict inputs and outputs.

    Inputs: `token_ids`, `segment_ids`, `padding_mask` (1 = token, 0 = padding),
    each int [B, T]. Outputs: `sequence_output` [B, T, H] and `pooled_output`
    [B, H]; with `return_hidden_states`, `hidden_states` [B, L + 1, T, H]
    (index 0 is the embedding output, index i the output of layer i); with
    `return_attention_scores`, `attention_probs` [B, L, N, T, T].

    Args:
        vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim: ints.
        dropout: float. Hidden dropout (0.1 in BERT).
        attention_dropout: float or None (defaults to `dropout`).
        max_sequence_length: int. 512 in BERT.
        num_segments: int. Segment (token type) vocabulary, 2 in BERT.
        position_embedding: "learned" (BERT) or "sinusoidal".
        activation: feed-forward activation: "gelu" (exact) or "gelu_approximate".
        layer_norm_epsilon: float.
        initializer_range: float.
        return_hidden_states: bool. Also output every layer's hidden states.
        return_attention_scores: bool. Also output every layer's attention probabilities.
        fused_kernels: bool. On the JAX backend on a GPU, the encoder layers run their
            elementwise chains as Pallas kernels (see `TransformerEncoder`); elsewhere, and by
            default, `keras.ops`. Weights and checkpoints are the same either way.
        dtype: dtype policy, e.g. "mixed_bfloat16".

    Example:
    >>> backbone = BertBackbone.from_preset("bert_tiny")
    >>> x = {"token_ids": np.array([[101, 7592, 102, 0]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.array([[1, 1, 1, 0]])}
    >>> backbone(x)["pooled_output"].shape
    TensorShape([1, 128])
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        attention_dropout=None,
        max_sequence_length=512,
        num_segments=2,
        position_embedding="learned",
        activation="gelu",
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        return_hidden_states=False,
        return_attention_scores=False,
        fused_kernels=False,
        dtype=None,
        **kwargs,
    ):
        for name, value in (
            ("vocabulary_size", vocabulary_size),
            ("num_layers", num_layers),
            ("num_heads", num_heads),
            ("hidden_dim", hidden_dim),
            ("intermediate_dim", intermediate_dim),
            ("max_sequence_length", max_sequence_length),
            ("num_segments", num_segments),
        ):
            check_positive_int(name, value)
        check_divisible(hidden_dim, num_heads)
        check_probability("dropout", dropout)
        check_choice("position_embedding", position_embedding, POSITION_EMBEDDINGS)
        check_choice("activation", activation, ACTIVATIONS)
        check_bool("fused_kernels", fused_kernels)

        # === Layers ===
        self.embeddings = BertEmbeddings(
            vocabulary_size=vocabulary_size,
            hidden_dim=hidden_dim,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments,
            position_embedding=position_embedding,
            dropout=dropout,
            layer_norm_epsilon=layer_norm_epsilon,
            initializer_range=initializer_range,
            dtype=dtype,
            name="embeddings",
        )
        self.transformer_layers = [
            TransformerEncoder(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                attention_dropout=attention_dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                initializer_range=initializer_range,
                fused_kernels=fused_kernels,
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.pooler = BertPooler(initializer_range=initializer_range, dtype=dtype, name="pooler")

        # === Functional graph ===
        inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in MODEL_ID_INPUTS}
        layers = self._run_layers(inputs, return_attention_scores, first_call=True)
        outputs = {"sequence_output": layers["sequence_output"], "pooled_output": layers["pooled_output"]}
        if return_hidden_states:
            outputs["hidden_states"] = ops.stack(layers["hidden_states"], axis=1)  # [B, L + 1, T, H]
        if return_attention_scores:
            outputs["attention_probs"] = ops.stack(layers["attention_probs"], axis=1)  # [B, L, N, T, T]
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)
        # Keras' functional __init__ drops `dtype`: the backbone's own policy (its config's
        # "dtype", and what a head's compile reads to add loss scaling) was then the global
        # one, so BertBackbone(dtype="mixed_bfloat16") came back float32 from a .keras file.
        # (A DTypePolicyMap, from_config's quantized build, is set by that build itself.)
        if dtype is not None and not isinstance(dtype, keras.dtype_policies.DTypePolicyMap):
            self.dtype_policy = dtype

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.position_embedding = position_embedding
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.return_hidden_states = return_hidden_states
        self.return_attention_scores = return_attention_scores
        self.fused_kernels = fused_kernels
        # The WordPiece vocabulary and casing of the checkpoint this model came
        # from; saved inside the .keras file as assets (see save_assets).
        self.vocabulary = None
        self.lowercase = None

    def __setattr__(self, name, value):
        # Layers are attributes before keras.Model.__init__ (see models/_early_attributes.py).
        set_attribute(self, name, value, super().__setattr__)

    def layer_outputs(self, inputs, return_attention_scores=False):
        """Runs this backbone's layers on `inputs` (the three input tensors, symbolic or
        concrete) and returns every intermediate result as a dict: `sequence_output`
        [B, T, H], `pooled_output` [B, H], `hidden_states` (a list of L + 1 tensors
        [B, T, H]: index 0 the embedding output, index i layer i's output) and, with
        `return_attention_scores`, `attention_probs` (a list of L tensors [B, N, T, T]).

        The backbone's own graph is built from it. Called on new `keras.Input`s it gives a
        second graph over the same layers (so the same weights) whose outputs may be any of
        the intermediate tensors, without changing the backbone's own outputs or what it
        saves: the Distiller's intermediate-layer transfer reads the student's and the
        teacher's hidden states and attention this way.
        """
        return self._run_layers(inputs, return_attention_scores, first_call=False)

    def _run_layers(self, inputs, return_attention_scores, first_call):
        x = self.embeddings(inputs["token_ids"], inputs["segment_ids"])  # [B, T, H]
        hidden_states, attention_probs = [x], []
        for layer in self.transformer_layers:
            if return_attention_scores:
                # Keras 3.15's Functional checks that a graph is connected with each layer's
                # first call's output count: an encoder first called without scores (one
                # output) then with them (two) fails that check. A wrapper layer of its own,
                # made for this graph, is first called with scores (and holds no weights).
                scoring = layer if first_call else _WithAttentionScores(layer)
                x, probs = scoring(x, padding_mask=inputs["padding_mask"], return_attention_scores=True)
                attention_probs.append(probs)  # [B, N, T, T]
            else:
                x = layer(x, padding_mask=inputs["padding_mask"])
            hidden_states.append(x)
        outputs = {"sequence_output": x, "pooled_output": self.pooler(x), "hidden_states": hidden_states}
        if return_attention_scores:
            outputs["attention_probs"] = attention_probs
        return outputs

    def _checking_backbone(self):
        return self

    @property
    def token_embedding(self):
        """The token embedding layer, shared with the masked-LM head."""
        return self.embeddings.token_embedding

    # --- inputs -------------------------------------------------------------

    def __call__(self, inputs, *args, **kwargs):
        self._validate_inputs(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def _validate_inputs(self, inputs):
        fix = (
            "Pass a dict with 'token_ids', 'segment_ids' and 'padding_mask', each an integer "
            "array of shape [batch, sequence_length]."
        )
        if not isinstance(inputs, dict):
            raise ValueError(
                f"BertBackbone expects a dict of inputs. Received: {type(inputs).__name__}. {fix}"
            )
        missing = [k for k in MODEL_ID_INPUTS if k not in inputs]
        unknown = [k for k in inputs if k not in MODEL_ID_INPUTS]
        if missing or unknown:
            raise ValueError(f"BertBackbone inputs: missing keys {missing}, unknown keys {unknown}. {fix}")
        for key in MODEL_ID_INPUTS:
            value = inputs[key]
            shape = getattr(value, "shape", None)
            if shape is None:
                value = np.asarray(value)
                shape = value.shape
            if len(shape) != 2:
                raise ValueError(
                    f"Input '{key}' must have rank 2 [batch, sequence_length]. Received shape "
                    f"{tuple(shape)}. {fix}"
                )
            dtype = keras.backend.standardize_dtype(getattr(value, "dtype", "int32"))
            if not ("int" in dtype or dtype == "bool" and key == "padding_mask"):
                raise ValueError(
                    f"Input '{key}' must be an integer tensor. Received dtype {dtype}. "
                    "Token ids, segment ids and the padding mask are indices: cast them to int32."
                )
            length = shape[1]
            if length is not None and not isinstance(length, int):
                length = None
            if length is not None and length > self.max_sequence_length:
                raise ValueError(
                    f"Input '{key}' has sequence length {length}, longer than max_sequence_length="
                    f"{self.max_sequence_length}. Truncate the inputs (the preprocessor's sequence_length) "
                    "or use a model with more positions."
                )
        limits = {"token_ids": self.vocabulary_size, "segment_ids": self.num_segments, "padding_mask": 2}
        for key, limit in limits.items():
            array = _concrete(inputs[key])
            if array is None or array.size == 0:
                continue
            low, high = int(array.min()), int(array.max())
            if low < 0 or high >= limit:
                bad = high if high >= limit else low
                raise ValueError(
                    f"Input '{key}' holds the value {bad}, outside [0, {limit}). "
                    + {
                        "token_ids": f"The vocabulary has {limit} entries: tokenize with this model's own "
                        "vocab.txt.",
                        "segment_ids": (
                            f"The model has {limit} segment types: use 0 for sentence A, 1 for sentence B."
                        ),
                        "padding_mask": "Use 1 for real tokens and 0 for padding.",
                    }[key]
                )

    # --- LoRA ----------------------------------------------------------------

    def enable_lora(self, rank, targets=DEFAULT_LORA_TARGETS, alpha=None):
        """Low-rank adapters (Keras' `Dense.enable_lora`) on the Dense layers `targets` names,
        and every other weight of the backbone frozen.

        Args:
            rank: int > 0. The adapters' rank r: a [in, r] and b [r, out] per layer.
            targets: layer names (each layer's "query", "key", "value", "attention_output",
                "intermediate", "output"; the pooler's "dense") or paths
                ("transformer_layer_0/attention/query"). The query and value projections
                by default, as KerasHub.
            alpha: int or None. The adapters' output is scaled by alpha / rank (Keras' and
                PEFT's lora_alpha); None: alpha = rank.

        Enabled once, before compiling (inside the strategy's scope when distributed). The
        setting is part of the config, and the .keras file keeps the unmerged kernels and
        adapters (see models/lora.py). A head built on the backbone stays trainable.
        """
        enable_backbone_lora(self, rank, targets=targets, alpha=alpha)

    @property
    def trainable(self):
        return keras.layers.Layer.trainable.fget(self)

    @trainable.setter
    def trainable(self, value):
        keras.layers.Layer.trainable.fset(self, value)
        if value:  # a LoRA backbone made trainable trains its adapters, not its frozen weights
            freeze_all_but_adapters(self)

    @property
    def lora_settings(self):
        """{"rank", "alpha", "targets"} after `enable_lora`, else None."""
        return lora_settings(self)

    # --- vocabulary assets -------------------------------------------------

    def set_vocabulary(self, vocabulary, lowercase):
        """Attaches the WordPiece vocabulary (list of tokens) and casing used to
        make the token ids; they are saved with the model."""
        vocabulary = list(vocabulary)
        if len(vocabulary) != self.vocabulary_size:
            raise ValueError(
                f"The vocabulary has {len(vocabulary)} tokens but the model's vocabulary_size is "
                f"{self.vocabulary_size}. Use the vocab.txt that belongs to these weights."
            )
        # A plain attribute: Keras' and TensorFlow's trackers would walk every token (30,522 for
        # MiniLM, about a seventh of a tiny model's load) for a list that holds no variable or layer.
        object.__setattr__(self, "vocabulary", vocabulary)
        self.lowercase = bool(lowercase)

    def save_assets(self, dir_path):
        if self.vocabulary is None:
            return
        save_vocabulary_asset(dir_path, self.vocabulary)
        write_json_atomically({"lowercase": self.lowercase}, os.path.join(dir_path, TOKENIZER_ASSET))

    def load_assets(self, dir_path):
        vocabulary = load_vocabulary_asset(dir_path)
        if vocabulary is None:
            return
        with open(os.path.join(dir_path, TOKENIZER_ASSET), encoding="utf-8") as f:
            lowercase = json.load(f)["lowercase"]
        self.set_vocabulary(vocabulary, lowercase)

    # --- config ------------------------------------------------------------

    def get_config(self):
        config = super().get_config()  # name, trainable, dtype
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "max_sequence_length": self.max_sequence_length,
                "num_segments": self.num_segments,
                "position_embedding": self.position_embedding,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer_range": self.initializer_range,
                "return_hidden_states": self.return_hidden_states,
                "return_attention_scores": self.return_attention_scores,
                "fused_kernels": self.fused_kernels,
            }
        )
        if self.lora_settings is not None:
            config[_LORA] = self.lora_settings
        return record_quantized_layers(
            config, self
        )  # after model.quantize(...): see models/quantized_layers.py

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        lora = config.pop(_LORA, None)
        config, quantized = split_quantized_config(cls, config)
        if quantized is not None:
            backbone = build_with_quantized_layers(cls, config, quantized)
        else:
            backbone = cls(**config)
        if lora is not None:
            if not isinstance(lora, dict) or sorted(lora) != ["alpha", "rank", "targets"]:
                raise ValueError(
                    f"BertBackbone config field '{_LORA}' must be {{'rank', 'alpha', 'targets'}}. Received: "
                    f"{lora!r}. Fix the config JSON, or save the model again."
                )
            backbone.enable_lora(**lora)
        return backbone

    @classmethod
    def from_preset(cls, name, **kwargs):
        """Builds a randomly initialised backbone from a preset name (see `BERT_PRESETS`)."""
        if name not in BERT_PRESETS:
            raise ValueError(f"Unknown preset {name!r}. Choose one of: {', '.join(sorted(BERT_PRESETS))}.")
        return cls(**{**BERT_PRESETS[name], **kwargs})


class _WithAttentionScores(keras.layers.Layer):
    """A TransformerEncoder's call with its attention probabilities, as a layer of its own
    (see BertBackbone._run_layers): its variables are the encoder's."""

    def __init__(self, encoder, **kwargs):
        super().__init__(name=f"{encoder.name}_with_scores", dtype=encoder.dtype_policy, **kwargs)
        self.encoder = encoder

    def call(self, x, padding_mask=None, return_attention_scores=True, training=None):
        return self.encoder(x, padding_mask=padding_mask, return_attention_scores=True, training=training)
