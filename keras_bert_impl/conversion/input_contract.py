"""What an exported graph takes and gives: input names, layouts and dtypes, defined once.

Two id vocabularies meet here, on purpose. The Keras models take a dict keyed by
MODEL_ID_INPUTS (KerasHub's names); every exported id graph (the ids SavedModel, the
tflite/ and mediapipe/ files) takes EXPORT_ID_INPUTS, the names LiteRT's and MediaPipe
Tasks' BERT tokenizer feed (tensors called ids, mask and segment_ids).
`EXPORT_TO_MODEL_ID_INPUTS` maps one onto the other. `LiteRtForward` converts with the model's
own names: it is a library-internal forward pass, not an exported file.

Shape legend: B batch, S sequence length. TensorFlow is imported only by the functions that
build TensorSpecs, so the CLI's parser reads the lists here without it.
"""

from keras_bert_impl.validation import check_choice

# The one signature every exported graph serves (TF Serving's, LiteRT's and MediaPipe's default).
SERVING_ENDPOINT = "serving_default"
# The Keras models' id inputs, int32 [B, S] each.
MODEL_ID_INPUTS = ("token_ids", "segment_ids", "padding_mask")
# The id inputs of every exported graph, int32 [B, S] each, in call order.
EXPORT_ID_INPUTS = ("ids", "mask", "segment_ids")
EXPORT_TO_MODEL_ID_INPUTS = {"ids": "token_ids", "mask": "padding_mask", "segment_ids": "segment_ids"}
# The string inputs of a raw-text graph (text SavedModel, text-in .tflite), string [B] each,
# in call order: one text; a pair classifier's two; a span labeler's question and context.
TEXT_INPUT_LAYOUTS = (("text",), ("text", "text_b"), ("question", "context"))
# The one output a MediaPipe Tasks file gives, by head kind (TextClassifier reads
# probabilities, TextEmbedder an embedding).
MEDIAPIPE_OUTPUTS = {"classifier": "probabilities", "embedder": "embeddings"}
# What `kbert export --formats` writes, and the .tflite precisions of `--quantizations`.
EXPORT_FORMATS = ("saved_model", "tflite", "mediapipe", "text_tflite")
# What `kbert export --formats` writes as the whole --output folder instead (a model hub's
# layout: `from_pretrained(OUTPUT)`), given alone.
HUB_FORMATS = ("huggingface", "sentence_transformers")
QUANTIZATIONS = ("float32", "float16", "dynamic_int8", "int8_mixed")
# The integer-only precisions (conversion/integer_only.py): every op between the id inputs and
# the last DEQUANTIZE on int8 activations ("int8_only", TFLite's 8x8) or int16 activations with
# int8 weights ("int16x8_only", TFLite's 16x8), from a classifier's integer-friendly forward.
# Not among QUANTIZATIONS, `kbert export`'s default: classifiers only, and asked for by name.
INTEGER_ONLY_QUANTIZATIONS = ("int8_only", "int16x8_only")
# The GPU delegate's file: the same static [1, S] forward with float16 weights (no SHAPE or PACK
# op, which a GPU delegate cannot plan around). Classifiers only, asked for by name.
GPU_QUANTIZATIONS = ("float16_gpu",)
# The files at a static [1, S]: one per length of `kbert export --static-lengths`.
STATIC_QUANTIZATIONS = GPU_QUANTIZATIONS + INTEGER_ONLY_QUANTIZATIONS
# The precisions whose activation ranges are measured on real examples (a calibration set).
CALIBRATED_QUANTIZATIONS = ("int8_mixed",) + INTEGER_ONLY_QUANTIZATIONS
# Names a quantization had before, refused with today's (issue 31): `full_int8` keeps softmax,
# LayerNorm, GELU, the residual adds and most matmuls float, so it was never integer-only.
RENAMED_QUANTIZATIONS = {"full_int8": "int8_mixed"}


def check_quantization(name, value, choices=QUANTIZATIONS + STATIC_QUANTIZATIONS):
    """`value` if it is one of `choices`; a renamed one is refused naming its name today, and
    where the integer-only files are."""
    if value in RENAMED_QUANTIZATIONS:
        raise ValueError(
            f"{name} {value!r} is called {RENAMED_QUANTIZATIONS[value]!r} now: it keeps softmax, LayerNorm and "
            f"most matmuls in float, so it is not integer-only (for that, {' or '.join(INTEGER_ONLY_QUANTIZATIONS)})."
        )
    return check_choice(name, value, choices)


def text_input_names(span_labeler, pair):
    """The string inputs of a raw-text graph: ("question", "context") for a span labeler,
    ("text", "text_b") for a pair classifier, else ("text",)."""
    if span_labeler:
        return TEXT_INPUT_LAYOUTS[2]
    return TEXT_INPUT_LAYOUTS[1] if pair else TEXT_INPUT_LAYOUTS[0]


def id_signature(names=EXPORT_ID_INPUTS, batch=None, length=None):
    """int32 [batch, length] TensorSpecs named `names` (None: that dimension is free)."""
    import tensorflow as tf

    return [tf.TensorSpec([batch, length], tf.int32, name=name) for name in names]


def text_signature(names):
    """string [B] TensorSpecs named `names`."""
    import tensorflow as tf

    return [tf.TensorSpec([None], tf.string, name=name) for name in names]


def named_endpoint(call, names):
    """`call(*tensors)` as a function whose parameters are called `names`: a SavedModel
    signature and a .tflite take their input names from the traced function's parameters,
    so each layout needs its own `def`."""
    if names == ("text",):

        def serve(text):
            return call(text)
    elif names == ("text", "text_b"):

        def serve(text, text_b):
            return call(text, text_b)
    elif names == ("question", "context"):

        def serve(question, context):
            return call(question, context)
    elif names == EXPORT_ID_INPUTS:

        def serve(ids, mask, segment_ids):
            return call(ids, mask, segment_ids)
    elif names == MODEL_ID_INPUTS:

        def serve(token_ids, segment_ids, padding_mask):
            return call(token_ids, segment_ids, padding_mask)
    else:
        raise ValueError(
            f"names must be one of the input layouts {TEXT_INPUT_LAYOUTS + (EXPORT_ID_INPUTS, MODEL_ID_INPUTS)}. "
            f"Received: names={names!r}"
        )
    return serve
