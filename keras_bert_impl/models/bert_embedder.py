"""Sentence embeddings: pooled token vectors from a chosen layer.

Shape legend: B batch, T sequence length, H hidden size, L layers.
"""

import keras
from keras import ops

from keras_bert_impl.layers.masking import masked_max, masked_mean
from keras_bert_impl.models.bert_task import BertTask
from keras_bert_impl.validation import check_choice

POOLING = ("cls", "mean", "max")


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertEmbedder(BertTask):
    """Outputs `embeddings` [B, H]: the [CLS] vector, or the mean or max over
    non-padded tokens, of one layer, optionally L2-normalised (the
    sentence-transformers recipe is mean pooling + normalisation).

    Args:
        backbone: a `BertBackbone`. For a `layer_index` other than the last layer,
            build it with `return_hidden_states=True`.
        pooling: "cls", "mean" or "max".
        layer_index: int. 0 = embedding output, i = output of layer i, -1 = last layer.
        normalize: bool. L2-normalise the embedding.

    Example:
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> preprocessor = BertPreprocessor("data/minilm/vocab.txt", sequence_length=16)
    >>> x = preprocessor(["a gripping, funny film", "a dull mess"])
    >>> embedder = BertEmbedder(kb.BertBackbone.from_preset("bert_tiny"), pooling="mean", normalize=True)
    >>> embeddings = embedder.predict(x, verbose=0)["embeddings"]
    >>> embeddings.shape, np.linalg.norm(embeddings, axis=1).round(4)
    ((2, 128), array([1., 1.], dtype=float32))
    """

    _task_config_keys = ("pooling", "layer_index", "normalize")

    def __init__(self, backbone, pooling="mean", layer_index=-1, normalize=True, **kwargs):
        self._check_backbone(backbone)
        check_choice("pooling", pooling, POOLING)
        num_layers = backbone.num_layers
        if (
            isinstance(layer_index, bool)
            or not isinstance(layer_index, int)
            or not -(num_layers + 1) <= layer_index <= num_layers
        ):
            raise ValueError(
                f"layer_index must be an int in [{-(num_layers + 1)}, {num_layers}] for a "
                f"{num_layers}-layer backbone. Received: layer_index={layer_index!r}"
            )
        last_layer = layer_index in (-1, num_layers)
        if not last_layer and not backbone.return_hidden_states:
            raise ValueError(
                f"layer_index={layer_index} needs every layer's output: build the backbone with "
                "return_hidden_states=True (e.g. BertBackbone.from_preset(name, return_hidden_states=True))."
            )
        self.backbone = backbone
        inputs = backbone.input
        outputs = backbone(inputs)
        hidden = (
            outputs["sequence_output"] if last_layer else outputs["hidden_states"][:, layer_index]
        )  # [B, T, H]
        hidden = ops.cast(hidden, "float32")
        if pooling == "cls":
            pooled = hidden[:, 0, :]  # [B, H]
        elif pooling == "mean":
            pooled = masked_mean(hidden, inputs["padding_mask"])  # [B, H]
        else:
            pooled = masked_max(hidden, inputs["padding_mask"])  # [B, H]
        if normalize:
            # The norm written out: Keras 3.15's ops.norm hands JAX 0.11 its axis as a list,
            # which jit refuses ("Non-hashable static arguments are not supported").
            norm = ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True))  # [B, 1]
            pooled = pooled / ops.maximum(norm, 1e-12)
        super().__init__(inputs=inputs, outputs={"embeddings": pooled}, **kwargs)
        self.pooling = pooling
        self.layer_index = layer_index
        self.normalize = normalize
