"""The names tensors go by between the models, the tokenizer and the converted files, defined once.

A leaf module (plain Python, no imports) below models/, tokenization/, data/ and conversion/,
which all read it. Two id vocabularies meet here, on purpose. The Keras models take a dict
keyed by MODEL_ID_INPUTS (KerasHub's names); every exported id graph (the ids SavedModel, the
tflite/ and mediapipe/ files) takes EXPORT_ID_INPUTS, the names LiteRT's and MediaPipe Tasks'
BERT tokenizer feed (tensors called ids, mask and segment_ids). `EXPORT_TO_MODEL_ID_INPUTS`
maps one onto the other. `LiteRtForward` converts with the model's own names: it is a
library-internal forward pass, not an exported file.

Shape legend: B batch, S sequence length.
"""

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


def text_input_names(span_labeler, pair):
    """The string inputs of a raw-text graph: ("question", "context") for a span labeler,
    ("text", "text_b") for a pair classifier, else ("text",)."""
    if span_labeler:
        return TEXT_INPUT_LAYOUTS[2]
    return TEXT_INPUT_LAYOUTS[1] if pair else TEXT_INPUT_LAYOUTS[0]
