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

from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS, MODEL_ID_INPUTS, SERVING_ENDPOINT
from keras_bert_impl.conversion.native_log import native_output_held
from keras_bert_impl.inference.id_checks import check_id_arrays
from keras_bert_impl.inference.litert_cache import LiteRtCache
from keras_bert_impl.validation import check_positive_int, check_sequence_length

FROM_ENVIRONMENT = "environment"


class IntegerFileForward:
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
        import os

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
        num_threads = len(os.sched_getaffinity(0)) if num_threads is None else num_threads
        check_positive_int("num_threads", num_threads)
        if isinstance(cache, str) and cache == FROM_ENVIRONMENT:
            cache = LiteRtCache.from_environment()
        elif cache is not None and not isinstance(cache, LiteRtCache):
            raise ValueError(
                f"cache must be {FROM_ENVIRONMENT!r}, a LiteRtCache or None. Received: cache={cache!r}"
            )
        model.learned_ranges()  # its ValueError names the first untrained range and the fix

        def convert():
            with native_output_held():
                return convert_integer_only(model, self.sequence_length)

        # The file is static: its length is part of what is kept.
        quantization = f"int8_only/{self.sequence_length}"
        self.flatbuffer = convert() if cache is None else cache.flatbuffer(model, quantization, convert)
        self.cache_outcome = None if cache is None else cache.last
        self._id_sizes = {
            "token_ids": backbone.vocabulary_size,
            "segment_ids": backbone.num_segments,
            "padding_mask": 2,
        }
        from ai_edge_litert.interpreter import Interpreter

        with native_output_held():
            self._interpreter = Interpreter(model_content=self.flatbuffer, num_threads=num_threads)
            self._runner = self._interpreter.get_signature_runner(SERVING_ENDPOINT)
        self.output_names = tuple(sorted(self._runner.get_output_details()))

    @property
    def size_bytes(self):
        return len(self.flatbuffer)

    def __call__(self, token_ids, segment_ids, padding_mask):
        feed = {
            name: np.asarray(value, np.int32)
            for name, value in zip(MODEL_ID_INPUTS, (token_ids, segment_ids, padding_mask))
        }
        check_id_arrays(feed, self._id_sizes, self.sequence_length)
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
