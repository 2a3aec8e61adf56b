"""What the LiteRT forwards (`LiteRtForward`, `IntegerFileForward`) share: the converted file, from
the cache or converted, opened on LiteRT's interpreter, and their id inputs fed to its serving
signature after the checks the interpreter does not make (id_checks.py)."""

import os

import numpy as np

from keras_bert_impl.conversion.native_log import native_output_held
from keras_bert_impl.inference.id_checks import check_id_arrays
from keras_bert_impl.inference.litert_cache import LiteRtCache
from keras_bert_impl.tensor_names import MODEL_ID_INPUTS, SERVING_ENDPOINT
from keras_bert_impl.validation import check_positive_int

# The forwards' `cache` default: the LiteRtCache KBERT_CACHE_DIR names (or the user cache folder's).
FROM_ENVIRONMENT = "environment"


def litert_threads(num_threads):
    """`num_threads` checked; None: the CPUs this process may use."""
    num_threads = len(os.sched_getaffinity(0)) if num_threads is None else num_threads
    check_positive_int("num_threads", num_threads)
    return num_threads


def litert_cache(cache):
    """The LiteRtCache that `cache` names: "environment" (`LiteRtCache.from_environment()`), a
    LiteRtCache, or None (convert every time)."""
    if isinstance(cache, str) and cache == FROM_ENVIRONMENT:
        return LiteRtCache.from_environment()
    if cache is not None and not isinstance(cache, LiteRtCache):
        raise ValueError(
            f"cache must be {FROM_ENVIRONMENT!r}, a LiteRtCache or None. Received: cache={cache!r}"
        )
    return cache


class LiteRtSignature:
    """The base of the LiteRT forwards. A subclass's constructor checks its arguments, sets
    `_id_sizes` ({input: table size}, or None to leave ids unchecked) and `_max_length`, and
    calls `_open`; its `__call__` runs `self._runner` on `self._feed(...)`."""

    def _open(self, model, quantization, convert, cache, num_threads):
        """Takes `model`'s file from `cache` (a LiteRtCache or None), which keeps it by
        `quantization`, or from `convert()`, and opens its serving signature."""
        # ai_edge_litert is imported first: without it, the conversion would be paid for nothing.
        from ai_edge_litert.interpreter import Interpreter

        self.flatbuffer = convert() if cache is None else cache.flatbuffer(model, quantization, convert)
        # "hit", "miss" (converted and kept), "uncached" (a model the cache cannot key) or None (no cache).
        self.cache_outcome = None if cache is None else cache.last
        # The kept .tflite file this runs (None: not kept), which `kbert predict` of a run folder
        # can then open without TensorFlow (commands/lite_route.py).
        self.cache_path = None if cache is None else cache.path
        with native_output_held():
            self._interpreter = Interpreter(model_content=self.flatbuffer, num_threads=num_threads)
            self._runner = self._interpreter.get_signature_runner(SERVING_ENDPOINT)
        self.output_names = tuple(sorted(self._runner.get_output_details()))

    @property
    def size_bytes(self):
        return len(self.flatbuffer)

    def _feed(self, token_ids, segment_ids, padding_mask):
        """The ids as int32 arrays by input name, checked against the model's tables."""
        feed = {
            name: np.asarray(value, np.int32)
            for name, value in zip(MODEL_ID_INPUTS, (token_ids, segment_ids, padding_mask))
        }
        if self._id_sizes is not None:  # the interpreter checks none of it (id_checks.py)
            check_id_arrays(feed, self._id_sizes, self._max_length)
        return feed


def backbone_id_sizes(backbone):
    """{input: the size of the table its ids index} of `backbone` (check_id_arrays' `sizes`)."""
    return {"token_ids": backbone.vocabulary_size, "segment_ids": backbone.num_segments, "padding_mask": 2}
