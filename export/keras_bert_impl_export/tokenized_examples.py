"""Texts as the exported graphs take them: id arrays (the calibration examples, the ids
SavedModel's warm-up requests, the golden ids in export.json) or a raw-text request."""

import tensorflow as tf

from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS
from keras_bert_impl.tokenization import BertPreprocessor


def id_examples(serving, texts, sequence_length=None):
    """Texts (or (a, b) pairs) -> [{ids, mask, segment_ids}] int32 arrays [1, S], one per example."""
    x = tokenize(serving, texts, sequence_length)
    return [{name: x[name][i : i + 1] for name in EXPORT_ID_INPUTS} for i in range(len(x["ids"]))]


def tokenize(serving, texts, sequence_length=None):
    """Texts (or (a, b) pairs) -> {ids, mask, segment_ids} int32 arrays [N, S]; S is the
    export's length, or `sequence_length` (a static file's own length)."""
    if serving.pair:
        segments = (tf.constant([a for a, _ in texts]), tf.constant([b for _, b in texts]))
    else:
        segments = tf.constant(list(texts))
    preprocessor = serving.preprocessor
    if sequence_length not in (None, serving.sequence_length):
        preprocessor = BertPreprocessor.from_model(serving.model, sequence_length=sequence_length)
    x = preprocessor(segments)
    return {
        "ids": x["token_ids"].numpy(),
        "mask": x["padding_mask"].numpy(),
        "segment_ids": x["segment_ids"].numpy(),
    }


def text_request(serving, texts):
    if serving.pair:
        return {serving.text_inputs[0]: [a for a, _ in texts], serving.text_inputs[1]: [b for _, b in texts]}
    return {"text": list(texts)}
