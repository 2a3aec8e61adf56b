"""A `QuantizationAwareClassifier` run as its integer-only file: what `--precision int8` runs for a
`kbert finetune --qat` model (the file `kbert export --quantizations int8_only` writes, with the
ranges it learned), on LiteRT.

The file is static, [1, S] (conversion/integer_only.py says why: the full-integer quantizer takes
no free shapes), so each row of a [B, T] batch is padded to S and run alone. Attention and pooling
ignore padding, so a text gives what it gives at its own width, up to the file's rounding.
Dynamic-range int8 (`LiteRtForward`) is no substitute: it converts the Keras graph, and a QAT model's
graph holds fake-quantization ops TFLite has no builtin kernels for.

Shape legend: B batch, T a batch's padded width (at most S), S the file's sequence length.
"""

import numpy as np

from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS, MODEL_ID_INPUTS
from keras_bert_impl.conversion.native_log import native_output_held
from keras_bert_impl.inference.litert_signature import (
    FROM_ENVIRONMENT,
    LiteRtSignature,
    backbone_id_sizes,
    litert_cache,
    litert_threads,
)
from keras_bert_impl.validation import check_sequence_length


class IntegerFileForward(LiteRtSignature):
    """`(token_ids, segment_ids, padding_mask) -> {output: float32 [B, C]}` of a trained
    `QuantizationAwareClassifier`, computed by its integer-only .tflite at [1, sequence_length].

    Args:
        model: a `QuantizationAwareClassifier` whose activation ranges were trained.
        sequence_length: int. The file's static length S: every row is padded to it, and a
            batch wider than it is refused.
        num_threads: int. LiteRT's threads; default: the CPUs this process may use.
        cache: as for `LiteRtForward` ("environment", a `LiteRtCache` or None): the file is kept
            per model and length.

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100, max_sequence_length=8)
    >>> qat = kb.QuantizationAwareClassifier(kb.BertClassifier(backbone, num_classes=2, pooling="mean"))
    >>> ids = np.array([[2, 7, 3, 0]], "int32")
    >>> x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": (ids > 0).astype("int32")}
    >>> _ = qat(x, training=True)  # a training batch sets every range
    >>> forward = IntegerFileForward(qat, sequence_length=8, num_threads=1, cache=None)
    >>> forward(ids, np.zeros_like(ids), (ids > 0).astype("int32"))["logits"].shape
    (1, 2)
    """

    def __init__(self, model, sequence_length, num_threads=None, cache=FROM_ENVIRONMENT):
        from keras_bert_impl.conversion.integer_only import convert_integer_only
        from keras_bert_impl.models.quantization_aware_classifier import QuantizationAwareClassifier

        if not isinstance(model, QuantizationAwareClassifier):
            raise ValueError(
                f"IntegerFileForward runs a QuantizationAwareClassifier's integer-only file. Received: "
                f"model={type(model).__name__}"
            )
        backbone = model.classifier.backbone
        self.sequence_length = check_sequence_length(
            "sequence_length", sequence_length, backbone.max_sequence_length
        )
        num_threads = litert_threads(num_threads)
        cache = litert_cache(cache)
        model.learned_ranges()  # its ValueError names the first untrained range and the fix

        def convert():
            with native_output_held():
                return convert_integer_only(model, self.sequence_length)

        self._id_sizes, self._max_length = backbone_id_sizes(backbone), self.sequence_length
        # The file is static: its length is part of what is kept.
        self._open(model, f"int8_only/{self.sequence_length}", convert, cache, num_threads)

    def __call__(self, token_ids, segment_ids, padding_mask):
        feed = self._feed(token_ids, segment_ids, padding_mask)
        rows, width = feed["token_ids"].shape
        # The file's inputs are the exports' names (ids, mask, segment_ids), each [1, S].
        padded = {name: np.zeros((rows, self.sequence_length), np.int32) for name in MODEL_ID_INPUTS}
        for name in MODEL_ID_INPUTS:
            padded[name][:, :width] = feed[name]
        as_export = dict(
            zip(EXPORT_ID_INPUTS, (padded["token_ids"], padded["padding_mask"], padded["segment_ids"]))
        )
        outputs = {}
        for row in range(rows):
            out = self._runner(**{name: value[row : row + 1] for name, value in as_export.items()})
            for name, value in out.items():
                outputs.setdefault(name, []).append(np.asarray(value, np.float32))
        return {name: np.concatenate(parts) for name, parts in outputs.items()}
