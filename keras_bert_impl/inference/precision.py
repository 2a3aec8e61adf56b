"""A trained model to run in another precision: bf16 through Keras' mixed_bfloat16 policy.

On a CPU with AVX512-BF16, oneDNN runs bfloat16 matmuls on those units; Keras' mixed policy
keeps the variables in float32 and computes in bfloat16 (LayerNormalization and the losses
stay float32 by Keras' own rules). A `.keras` file saved in float32 carries a float32 policy
on every layer, so the copy is rebuilt from the model's config without those policies,
under mixed_bfloat16, and given the same weights, vocabulary and label names.

int8 is not a Keras model here: Keras' own `model.quantize("int8")` (3.15, TensorFlow backend)
works on our models and its .keras file loads back (models/quantized_layers.py), but it makes
the fine-tuned MiniLM slower on this CPU, not faster (`bench/perf/inference_precision.py`);
`LiteRtForward` (TFLite dynamic-range int8 on XNNPACK) is the int8 that is fast here, and
`TextPredictor(..., precision="int8")` uses it.
"""

from keras_bert_impl.models.model_copy import computes_in, rebuilt
from keras_bert_impl.models.quantized_layers import quantization_modes
from keras_bert_impl.precisions import PRECISIONS, check_precision

# What with_precision makes as a Keras model: int8 is LiteRtForward, a TFLite interpreter.
KERAS_PRECISIONS = tuple(p for p in PRECISIONS if p != "int8")
_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16"}


def with_precision(model, precision):
    """`model` in `precision`: for "fp32", `model` itself when it computes in float32 (or
    was quantized with model.quantize, which runs as saved), else a float32 copy; for "bf16",
    a copy computing in bfloat16 (mixed_bfloat16).

    Args:
        model: a built BERT model of this library (a backbone or a task model).
        precision: "fp32" or "bf16".

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100)
    >>> classifier = kb.BertClassifier(backbone, num_classes=2)
    >>> _ = classifier({"token_ids": np.ones((1, 4), "int32"), "segment_ids": np.zeros((1, 4), "int32"),
    ...                 "padding_mask": np.ones((1, 4), "int32")})
    >>> fast = with_precision(classifier, "bf16")
    >>> fast.dtype_policy.name, fast.backbone.dtype_policy.compute_dtype, keras.config.dtype_policy().name
    ('mixed_bfloat16', 'bfloat16', 'float32')
    """
    check_precision(precision, KERAS_PRECISIONS)
    quantized = quantization_modes(model)
    if precision == "fp32" and (quantized or computes_in(model) == {"float32"}):
        return model
    if not model.built:
        raise ValueError("with_precision needs a built model (call it once, or load a trained one).")
    if quantized:
        raise ValueError(
            f"with_precision({precision!r}) needs a float model; this one was quantized "
            f"({', '.join(quantized)}) with model.quantize. Load the float model it came from instead."
        )
    return rebuilt(model, _POLICIES[precision])
