"""Raw texts through a fine-tuned sequence classifier, batched by length.

MR sentences average about 27 wordpieces: padded to 128, most of the work multiplies
padding. Here the texts of a chunk are tokenized at the model's sequence length (so
truncation is what padding to it would give), sorted by length, and each batch is cut to
its own longest row (rounded up to a multiple of `bucket_multiple`, 1 by default: oneDNN and
XNNPACK take any width without recompiling, and on MR sentences with MiniLM the exact width
is faster than multiples of 16: bench/results/inference_throughput.json); outputs go back in order.
Attention and pooling ignore padded positions, so the result equals padding every text to
`sequence_length` (tests/inference: within 1e-5).

A call of a few texts (PLAIN_TOKENIZER_MAX_TEXTS) is tokenized in plain Python
(`BertPreprocessor.plain_tokenizer`, the same ids), not by the in-graph tokenizer, whose
dispatch alone cost about as much as LiteRT's int8 forward of one MR sentence.

`precision` and `runtime` pick the forward pass, as `ForwardResolver` (forward_resolver.py)
decides and builds it: "fp32" the model's function in `OneDnnForms` (a `BertClassifier` computing
in float32: its LayerNorms one oneDNN kernel each, faster than the Keras graph
(bench/results/forward_gap_xeon.json), within 1e-5 of it) or the model itself (a QuantizationAwareClassifier's
fake-quantized forward, a model under a mixed policy or quantized by Keras); "bf16" a copy under
Keras' mixed_bfloat16 policy (`with_precision`); "int8" its dynamic-range int8 TFLite conversion on
XNNPACK (`LiteRtForward`), or a QuantizationAwareClassifier's integer-only file
(`IntegerFileForward`). `runtime="litert"` runs fp32 there too: the classifier's float32 TFLite
conversion on XNNPACK (opt-in; keras_bert_impl/precisions.py's RUNTIMES says what it gains and
costs). What a model does not run is refused there, in one line naming what to use.

Shape legend: N texts in a chunk, S sequence_length, B batch, T a batch's padded width.
"""

import numpy as np
import tensorflow as tf

from keras_bert_impl.tensor_names import MODEL_ID_INPUTS
from keras_bert_impl.inference.forward_resolver import ForwardResolver
from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.precisions import check_precision
from keras_bert_impl.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH, check_positive_int, check_sequence_length

# Calls of at most this many texts are tokenized in plain Python (`BertPreprocessor.plain_tokenizer`):
# it costs ~0.1 ms a MR sentence, where the in-graph tokenizer's dispatch costs ~1 ms a call and
# ~5 us a sentence (2-core AVX2 EPYC, CPU-ms medians at 128: 1 text 0.16 vs 0.97, 4: 0.46 vs 1.02,
# 16: 1.44 vs 1.34, 64: 6.4 vs 2.2). Same ids either way (tests/tokenization/test_plain_tokenizer.py).
PLAIN_TOKENIZER_MAX_TEXTS = 8


class TextPredictor:
    """Predicts a `BertClassifier`'s outputs for raw texts (or text pairs), in input order.

    Args:
        model: a `BertClassifier` whose backbone carries its vocabulary (what `kbert
            finetune` writes).
        sequence_length: int >= 3. Texts are cut to it, as in training.
        batch_size: int. Texts per forward pass.
        bucket_multiple: int. Batch widths are rounded up to a multiple of it (1: each
            batch's own longest row). Larger values mean fewer distinct shapes, which only
            matters to a forward pass compiled per shape (XLA).
        precision: "fp32", "bf16" or "int8" (see above). int8 converts the model on
            construction (about 10 s for MiniLM-L6; kept for the next process, litert_cache.py).
        runtime: "tensorflow" or "litert": where fp32 runs (None: TensorFlow for fp32 and bf16,
            LiteRT for int8). "litert" converts the model on construction, as int8 does.

    Example:
    >>> from keras_bert_impl.tokenization.vocabulary import read_vocabulary
    >>> backbone = kb.BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16,
    ...                            intermediate_dim=32, max_sequence_length=64)
    >>> backbone.set_vocabulary(read_vocabulary("data/minilm/vocab.txt"), lowercase=True)
    >>> model = kb.BertClassifier(backbone, num_classes=2)
    >>> outputs = TextPredictor(model, sequence_length=64).predict(["a fine film", "dull"])
    >>> outputs["logits"].shape
    (2, 2)
    """

    def __init__(
        self,
        model,
        sequence_length=DEFAULT_SEQUENCE_LENGTH,
        batch_size=32,
        bucket_multiple=1,
        precision="fp32",
        runtime=None,
    ):
        from keras_bert_impl.models.quantization_aware_classifier import QuantizationAwareClassifier

        if not isinstance(model, (BertClassifier, QuantizationAwareClassifier)):
            raise ValueError(
                "TextPredictor takes a BertClassifier (sequence-level outputs). Received: "
                f"model={type(model).__name__}"
            )
        check_precision(precision)
        # What runs (or the one line refusing it) is ForwardResolver's to say.
        resolved = ForwardResolver(model, precision, runtime)
        backbone = model.backbone
        if backbone.vocabulary is None:
            raise ValueError(
                "The model's backbone carries no vocabulary: call backbone.set_vocabulary(...) first."
            )
        check_positive_int("batch_size", batch_size)
        check_positive_int("bucket_multiple", bucket_multiple)
        sequence_length = check_sequence_length(
            "sequence_length", sequence_length, backbone.max_sequence_length
        )
        self.model = model
        self.sequence_length = sequence_length
        self.batch_size = batch_size
        self.bucket_multiple = bucket_multiple
        self.precision = resolved.precision
        self.runtime = resolved.runtime
        self._preprocessor = BertPreprocessor(
            backbone.vocabulary, lowercase=backbone.lowercase, sequence_length=sequence_length
        )
        # Tokenizing eagerly dispatches tensorflow-text's ops one by one, about half of a
        # one-sentence call (issue 33's batch-1 split); traced once per layout, it runs as a graph.
        strings = tf.TensorSpec([None], tf.string)
        self._tokenize = {
            1: tf.function(lambda texts: self._preprocessor(texts), input_signature=[strings]),
            2: tf.function(
                lambda texts, texts_b: self._preprocessor((texts, texts_b)),
                input_signature=[strings, strings],
            ),
        }
        self._forward = resolved.forward(sequence_length)
        # BertPreprocessor's ids in plain Python (`plain_tokenizer`), made on the first small call.
        self._plain_tokenizer = None

    @property
    def forward(self):
        """What runs each batch's ids: a `LiteRtForward`, an `IntegerFileForward` or a
        `tf.function` of the Keras model (`ForwardResolver.forward`)."""
        return self._forward

    def predict(self, texts, texts_b=None, chunk_size=4096, progress=None):
        """texts (list of str; `texts_b` the second texts of pairs) -> {output name: float32
        array [N, ...]} in input order. `progress(n)` is called after each batch with its size."""
        texts = list(texts)
        if texts_b is not None and len(texts_b) != len(texts):
            raise ValueError(
                f"texts_b must have one entry per text. Received {len(texts)} texts and {len(texts_b)}."
            )
        check_positive_int("chunk_size", chunk_size)
        parts = []
        for start in range(0, len(texts), chunk_size):
            chunk_b = None if texts_b is None else list(texts_b[start : start + chunk_size])
            parts.append(self._predict_chunk(texts[start : start + chunk_size], chunk_b, progress))
        if not parts:
            return {}
        return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}

    def batches(self, texts, texts_b=None):
        """The forward passes `predict` makes for one chunk of texts: yields (rows, token_ids,
        segment_ids, padding_mask), rows [B] the texts' indices, the arrays int32 [B, T], each
        batch cut to its longest row (rounded up to `bucket_multiple`), longest batches first."""
        token_ids, segment_ids, mask = self._ids(texts, texts_b)  # [N, S] each
        lengths = mask.sum(axis=1)  # [N]
        # Longest first: the first batch meets the widest shape, and each batch pads only a little.
        order = np.argsort(-lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = int(
                min(
                    -(-lengths[rows].max() // self.bucket_multiple) * self.bucket_multiple, token_ids.shape[1]
                )
            )
            yield (rows, *(a[rows, :width] for a in (token_ids, segment_ids, mask)))  # [B, T] each

    def _ids(self, texts, texts_b):
        """A chunk's (token_ids, segment_ids, padding_mask), int32 [N, S] each: BertPreprocessor's
        ids, from its plain-Python twin for a few `str` texts (see PLAIN_TOKENIZER_MAX_TEXTS)."""
        segments = [texts] if texts_b is None else [texts, texts_b]
        if (
            len(texts) <= PLAIN_TOKENIZER_MAX_TEXTS
            and all(isinstance(t, str) for segment in segments for t in segment)
            and (texts_b is None or self.sequence_length >= 4)  # the plain encoder packs a pair in 4 or more
        ):
            if self._plain_tokenizer is None:
                self._plain_tokenizer = self._preprocessor.plain_tokenizer()
            pairs = None if texts_b is None else list(texts_b)
            x = self._plain_tokenizer.encode(list(texts), pairs, self.sequence_length)
            return tuple(x[k] for k in MODEL_ID_INPUTS)
        x = self._tokenize[len(segments)](*(tf.constant(list(t), tf.string) for t in segments))
        return tuple(np.asarray(x[k]) for k in MODEL_ID_INPUTS)

    def _predict_chunk(self, texts, texts_b, progress):
        outputs = {}
        for rows, *ids in self.batches(texts, texts_b):
            out = self._forward(*ids)
            for name, value in out.items():
                value = np.asarray(value, np.float32)
                if name not in outputs:
                    outputs[name] = np.empty((len(texts), *value.shape[1:]), np.float32)
                outputs[name][rows] = value
            if progress is not None:
                progress(len(rows))
        return outputs
