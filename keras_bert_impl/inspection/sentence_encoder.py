"""Sentence vectors from a BERT backbone, with bert-as-service's pooling choices, for files of
any size: texts are tokenized in chunks, sorted by length within a chunk and batched so that
each batch is padded only to its own longest text (rounded up to a multiple of 8), then put
back in input order.

Shape legend: B batch, T tokens in a batch, H hidden size, K pooled layers.
"""

import hashlib

import numpy as np
import tensorflow as tf
from keras import ops

from keras_bert_impl.layers.masking import masked_max, masked_mean
from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert_impl.validation import (
    DEFAULT_SEQUENCE_LENGTH,
    check_bool,
    check_choice,
    check_int,
    check_positive_int,
    check_sequence_length,
)

# bert-as-service's strategies; "first-last-mean" is the mean-pooled average of the first and
# last encoder layers' outputs (the "first-last-avg" of BERT-flow and SimCSE's evaluations).
POOLING = ("cls", "mean", "max", "first-last-mean")
# Batches are padded to a multiple of this: few distinct shapes, little padding.
BUCKET_MULTIPLE = 8


class SentenceEncoder:
    """Embeds texts with a `BertBackbone` that carries its vocabulary.

    Args:
        backbone: a `BertBackbone` with a vocabulary (converted or kbert-trained models have one).
        pooling: one of POOLING. The published recipe of sentence-transformers models such
            as all-MiniLM-L6-v2 is "mean" with `normalize=True`.
        layers: layer indices to pool (0 = embeddings, i = encoder layer i, -1 = last);
            several are concatenated, as bert-as-service does. Not with "first-last-mean".
        normalize: L2-normalise each pooled vector (cosine similarity becomes a dot product).
        sequence_length: wordpieces per text, [CLS] and [SEP] included; longer texts are
            truncated (counted in `truncated`).
        batch_size: texts per forward pass.

    Example:
    >>> from keras_bert_impl.tokenization import read_vocabulary
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny")
    >>> backbone.set_vocabulary(read_vocabulary("data/minilm/vocab.txt"), lowercase=True)
    >>> encoder = SentenceEncoder(backbone, pooling="mean", normalize=True)
    >>> vectors = encoder.encode(["a gripping, funny film", "a dull mess", ""])
    >>> vectors.shape, np.linalg.norm(vectors, axis=1).round(4)
    ((3, 128), array([1., 1., 1.], dtype=float32))
    """

    def __init__(
        self,
        backbone,
        pooling="mean",
        layers=(-1,),
        normalize=True,
        sequence_length=DEFAULT_SEQUENCE_LENGTH,
        batch_size=64,
    ):
        if not isinstance(backbone, BertBackbone):
            raise ValueError(f"SentenceEncoder needs a BertBackbone. Received: {type(backbone).__name__}")
        if backbone.vocabulary is None:
            raise ValueError(
                "The backbone carries no vocabulary: load one written by `kbert convert` or `kbert finetune`."
            )
        check_choice("pooling", pooling, POOLING)
        check_bool("normalize", normalize)
        check_positive_int("batch_size", batch_size)
        check_sequence_length("sequence_length", sequence_length, backbone.max_sequence_length, minimum=2)
        layers = tuple(layers)
        num_layers = backbone.num_layers
        if not layers:
            raise ValueError("layers must name at least one layer, e.g. (-1,) for the last.")
        for layer in layers:
            check_int("layers", layer)
            if not -(num_layers + 1) <= layer <= num_layers:
                raise ValueError(
                    f"layers must be in [{-(num_layers + 1)}, {num_layers}] for a {num_layers}-layer model "
                    f"(0 = embeddings, -1 = last). Received: layers={list(layers)}"
                )
        if pooling == "first-last-mean" and layers != (-1,):
            raise ValueError(
                f"pooling='first-last-mean' chooses its own layers (1 and {num_layers}); leave layers at "
                "(-1,)."
            )
        self.pooling = pooling
        self.layers = layers
        self.normalize = normalize
        self.sequence_length = sequence_length
        self.batch_size = batch_size
        self.backbone = backbone
        self.vocabulary = list(backbone.vocabulary)
        self.lowercase = backbone.lowercase
        # No packing length: texts are packed here, so each batch is padded only as far as it needs.
        self._preprocessor = BertPreprocessor(self.vocabulary, lowercase=self.lowercase, sequence_length=None)
        pooled_layers = (
            (1, num_layers)
            if pooling == "first-last-mean"
            else tuple(layer % (num_layers + 1) for layer in layers)
        )
        self._pooled_layers = pooled_layers
        self._model = self._with_hidden_states(backbone) if pooled_layers != (num_layers,) else backbone
        spec = tf.TensorSpec([None, None], tf.int32)

        def forward(token_ids, padding_mask):
            return self._pool(token_ids, padding_mask)

        # One trace for every batch shape: the graph has dynamic batch and length axes. (A
        # function of its own per encoder: TensorFlow counts traces per Python function, and
        # would warn about "retracing" when several encoders share one bound method.)
        self._forward = tf.function(forward, input_signature=[spec, spec])
        self.truncated = 0
        self._fingerprint = None

    @property
    def dim(self):
        """The length of one vector."""
        return self.backbone.hidden_dim * (1 if self.pooling == "first-last-mean" else len(self.layers))

    def config(self):
        """What decides the vectors besides the weights (stored beside indexes and vector files)."""
        return {
            "pooling": self.pooling,
            "layers": list(self.layers),
            "normalize": self.normalize,
            "sequence_length": self.sequence_length,
        }

    def fingerprint(self):
        """sha256 of the weights, vocabulary, casing and `config()`: vectors with different
        fingerprints do not live in the same space."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            digest.update(repr(sorted(self.config().items())).encode())
            digest.update(f"lowercase={self.lowercase}".encode())
            digest.update("\n".join(self.vocabulary).encode("utf-8"))
            for weight in self.backbone.weights:
                value = np.ascontiguousarray(ops.convert_to_numpy(weight.value))
                digest.update(f"{weight.path}:{value.dtype}:{value.shape}".encode())
                digest.update(value.tobytes())
            self._fingerprint = digest.hexdigest()
        return self._fingerprint

    @staticmethod
    def _with_hidden_states(backbone):
        config = backbone.get_config()
        config.pop("name", None)
        config.update(return_hidden_states=True, return_attention_scores=False)
        model = BertBackbone.from_config(config)
        model.set_weights(backbone.get_weights())
        return model

    def _pool(self, token_ids, padding_mask):
        inputs = {
            "token_ids": token_ids,
            "segment_ids": ops.zeros_like(token_ids),
            "padding_mask": padding_mask,
        }
        outputs = self._model(inputs, training=False)
        if "hidden_states" in outputs:
            layers = [outputs["hidden_states"][:, i] for i in self._pooled_layers]  # K x [B, T, H]
        else:
            layers = [outputs["sequence_output"]]
        layers = [ops.cast(h, "float32") for h in layers]
        if self.pooling == "cls":
            pooled = [h[:, 0, :] for h in layers]
        elif self.pooling == "max":
            pooled = [masked_max(h, padding_mask) for h in layers]
        else:
            pooled = [masked_mean(h, padding_mask) for h in layers]  # K x [B, H]
        if self.pooling == "first-last-mean":
            pooled = [(pooled[0] + pooled[1]) / 2.0]
        if self.normalize:
            pooled = [p / ops.maximum(ops.norm(p, axis=-1, keepdims=True), 1e-12) for p in pooled]
        return ops.concatenate(pooled, axis=-1) if len(pooled) > 1 else pooled[0]  # [B, H * K]

    def pack(self, texts):
        """Texts -> (token_ids [N, T] int32, lengths [N], truncated [N] bool): [CLS] text [SEP],
        cut to `sequence_length`, padded to the longest packed text."""
        pieces = self._preprocessor.tokenize(tf.constant(list(texts), tf.string))  # [N, (P)]
        full = pieces.row_lengths().numpy()
        budget = self.sequence_length - 2
        pieces = pieces[:, :budget]
        rows = pieces.nrows()
        cls = tf.fill(tf.stack([rows, 1]), tf.constant(self._preprocessor.cls_id, tf.int32))
        sep = tf.fill(tf.stack([rows, 1]), tf.constant(self._preprocessor.sep_id, tf.int32))
        packed = tf.concat([cls, tf.cast(pieces, tf.int32), sep], axis=1)
        token_ids = packed.to_tensor(default_value=self._preprocessor.pad_id).numpy()  # [N, T]
        return token_ids, np.minimum(full, budget) + 2, full > budget

    def encode(self, texts):
        """Texts (a list of str) -> float32 [N, dim], in input order. Adds to `truncated`."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        token_ids, lengths, truncated = self.pack(texts)
        self.truncated += int(truncated.sum())
        out = np.empty((len(texts), self.dim), np.float32)
        # Longest first: the first batch meets the largest shape, and each batch pads only a little.
        order = np.argsort(-lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = int(min(-(-lengths[rows].max() // BUCKET_MULTIPLE) * BUCKET_MULTIPLE, token_ids.shape[1]))
            ids = token_ids[rows, :width]  # [B, T]
            mask = (np.arange(width)[None, :] < lengths[rows, None]).astype(np.int32)  # [B, T]
            out[rows] = self._forward(tf.constant(ids), tf.constant(mask)).numpy()
        return out

    def encode_stream(self, texts, chunk_size=4096, progress=None):
        """Yields float32 [n, dim] arrays for consecutive chunks of an iterable of texts, so
        memory stays bounded by the chunk, whatever the number of texts. `progress(n)` is
        called after each chunk with the count done so far."""
        check_positive_int("chunk_size", chunk_size)
        chunk, done = [], 0
        for text in texts:
            chunk.append(text)
            if len(chunk) == chunk_size:
                yield self.encode(chunk)
                done += len(chunk)
                chunk = []
                if progress:
                    progress(done)
        if chunk:
            yield self.encode(chunk)
            if progress:
                progress(done + len(chunk))
