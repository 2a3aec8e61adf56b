"""A classifier's forward pass on LiteRT's XNNPACK: in int8 (TFLite's dynamic-range
quantization), or unquantized in float32 (`--runtime litert`'s fp32).

Why not Keras' own `model.quantize("int8")`: on this stack (Keras 3.15, TensorFlow 2.20) it
makes the fine-tuned MiniLM slower than float32 (its int8 matmuls do not reach oneDNN's VNNI
kernels through TensorFlow; bench/results/inference_precision.json), though it works on our
models and saves and loads as .keras (models/quantized_layers.py). TensorFlow offers no other
maintained int8 route to oneDNN. TFLite's dynamic-range int8 is the maintained path that does
reach the CPU's int8 dot-product units: the weights of every fully connected layer are stored in int8 with a
scale per output channel, each batch's activations are quantized on the fly, and XNNPACK runs
the products with its AVX512-VNNI kernels; LayerNorm, softmax and GELU stay float32. It is the
quantization of `kbert export`'s `dynamic_int8` .tflite (through the one conversion home,
keras_bert_impl.conversion), with the batch and length dimensions left free and the model's own
input names, so length-bucketed batches of any shape run without retracing. A classifier is
converted in `LiteRtForms` (the integer forms' forward with a plain LayerNorm: no UNPACK, leaner
norms; faster than the Keras graph on XNNPACK: bench/results/litert_profile.json);
the files `kbert export` writes keep the Keras graph.

Shape legend: B batch, T a batch's padded width.
"""

import numpy as np
import tensorflow as tf

from keras_bert_impl.conversion.native_log import native_output_held
from keras_bert_impl.conversion.tflite_converter import convert_endpoint
from keras_bert_impl.conversion.input_contract import id_signature, named_endpoint
from keras_bert_impl.tensor_names import MODEL_ID_INPUTS
from keras_bert_impl.inference.litert_signature import (
    FROM_ENVIRONMENT,
    LiteRtSignature,
    backbone_id_sizes,
    litert_cache,
    litert_threads,
)
from keras_bert_impl.inference.litert_forms import LiteRtForms, computes_in_forms
from keras_bert_impl.models.integer_forms import classifier_forward
from keras_bert_impl.precisions import LITERT_QUANTIZATION

# What LiteRtForward can run: its int8, and the float graph (fp32 on the litert runtime).
LITERT_QUANTIZATIONS = tuple(LITERT_QUANTIZATION.values())


class LiteRtForward(LiteRtSignature):
    """`(token_ids, segment_ids, padding_mask) -> {output: float32 array}` of a Keras BERT
    model, computed by its TFLite conversion on XNNPACK: dynamic-range int8 by default. A
    ValueError names the first input of a call that is not [B, S] ids inside the model's tables
    (`check_id_arrays`).

    Args:
        model: a built BERT task model of this library (dict inputs `token_ids`,
            `segment_ids`, `padding_mask`; a dict of outputs).
        num_threads: int. XNNPACK's threads; default: the CPUs this process may use.
        quantization: "dynamic_int8" (default), or "float32" for the same graph unquantized
            on XNNPACK's float kernels (`TextPredictor(runtime="litert")`'s fp32, which
            bench/perf/forward_gap.py measures against TensorFlow's fp32 forward).
        cache: where the converted file is looked for and kept (litert_cache.py): "environment"
            (default: `LiteRtCache.from_environment()`, which KBERT_CACHE_DIR=off turns off), a
            `LiteRtCache`, or None to convert every time.

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100)
    >>> model = kb.BertClassifier(backbone, num_classes=2)
    >>> ids = np.array([[2, 7, 3, 0]], "int32")
    >>> forward = LiteRtForward(model, num_threads=1)
    >>> forward(ids, np.zeros_like(ids), (ids > 0).astype("int32"))["logits"].shape
    (1, 2)
    """

    def __init__(self, model, num_threads=None, quantization="dynamic_int8", cache=FROM_ENVIRONMENT):
        if not model.built:
            raise ValueError("LiteRtForward needs a built model (call it once, or load a trained one).")
        # Each call's inputs are checked against the backbone's tables (a model without one: unchecked).
        backbone = getattr(model, "backbone", None)
        self._id_sizes = None if backbone is None else backbone_id_sizes(backbone)
        self._max_length = None if backbone is None else backbone.max_sequence_length
        num_threads = litert_threads(num_threads)
        if quantization not in LITERT_QUANTIZATIONS:
            raise ValueError(
                f"quantization must be one of {LITERT_QUANTIZATIONS}. Received: quantization={quantization!r}"
            )
        cache = litert_cache(cache)
        self.quantization = quantization

        def convert():
            with native_output_held():
                return convert_for_litert(model, quantization)

        # The cache's own warnings (a damaged or unwritable file) are outside the capture.
        self._open(model, quantization, convert, cache, num_threads)
        with native_output_held():
            # XNNPACK is applied (and says so) on the first run: here, inside the capture.
            ids = np.ones((1, 4), np.int32)
            self._runner(token_ids=ids, segment_ids=np.zeros_like(ids), padding_mask=ids)

    def __call__(self, token_ids, segment_ids, padding_mask):
        # The signature runner resizes its inputs to each batch's [B, T] (and re-plans its
        # buffers only when the shape changed).
        outputs = self._runner(**self._feed(token_ids, segment_ids, padding_mask))
        return {name: np.array(value, np.float32) for name, value in outputs.items()}


def convert_for_litert(model, quantization, batch=None, length=None):
    """The model's .tflite bytes in `quantization`, builtin ops only, [batch, length] inputs (None:
    free, as LiteRtForward converts): a float32 `BertClassifier` in `LiteRtForms` (faster on XNNPACK,
    same function; `computes_in_forms`), any other model as its Keras graph."""

    def forward(token_ids, segment_ids, padding_mask):  # [B, T] each
        inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        if computes_in_forms(model):
            outputs = classifier_forward(model, inputs, LiteRtForms())
        else:
            outputs = model(inputs, training=False)
        return {name: tf.cast(value, tf.float32) for name, value in outputs.items()}

    return convert_endpoint(
        named_endpoint(forward, MODEL_ID_INPUTS), id_signature(MODEL_ID_INPUTS, batch, length), quantization
    )
