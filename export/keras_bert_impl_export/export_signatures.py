"""A fine-tuned model as the signatures an export holds: token ids in, or raw text in.

What export builds (`ExportSignatures`), as opposed to what `kbert serve` loads back from
disk (`serve.servable_model.ServableModel`, TF Serving's "servable").

Shape legend: B batch, S sequence length (the export's --seq-len for text input, any length
up to the model's positions for ids), C classes, H hidden size.
"""

import keras
import tensorflow as tf

from keras_bert_impl.conversion.input_contract import id_signature, named_endpoint, text_signature
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS, SERVING_ENDPOINT, text_input_names
from keras_bert_impl.models import BertClassifier, BertEmbedder, BertSpanLabeler, BertTokenClassifier
from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.validation import check_bool, check_sequence_length

# What each kind of head is called in the CLI, the report and the artifacts' metadata.
HEAD_KINDS = {
    BertClassifier: "classifier",
    BertTokenClassifier: "tagger",
    BertSpanLabeler: "span_labeler",
    BertEmbedder: "embedder",
}
# Longest answer, in tokens, the span labeler's text signature returns (Google's run_squad.py).
MAX_ANSWER_TOKENS = 30


def head_kind(model):
    """ "classifier", "tagger", "span_labeler" or "embedder"; a clear error for anything else."""
    for cls, kind in HEAD_KINDS.items():
        if isinstance(model, cls):
            return kind
    raise ValueError(
        f"kbert export has no export for a {type(model).__name__}. It exports the heads kbert finetune "
        f"makes ({', '.join(c.__name__ for c in HEAD_KINDS)}); wrap a bare backbone in a BertEmbedder "
        "to export sentence embeddings."
    )


def _assert(ok, message):
    """An Assert op failing when bool scalar `ok` is False, with the string `message()` builds,
    computed only then. No quotes in messages: TensorFlow prints an Assert's strings escaped."""
    return tf.debugging.Assert(ok, [tf.cond(ok, lambda: tf.constant(""), message)])


def _range_check(name, values, size):
    """An Assert op that fails when int [B, S] `values` hold anything outside [0, size), naming
    the first such value by example and position, as `kbert serve`'s LiteRT calls do."""
    bad = tf.logical_or(values < 0, values >= size)  # [B, S]

    def message():
        at = tf.where(bad)[0]  # [2] int64: the first (example, position) outside, row-major
        value = tf.gather_nd(values, at[None])[0]
        return tf.strings.format(
            f"Input {name} holds {{}} at example {{}}, position {{}}: this model takes values in [0, {size}) "
            "there.",
            (value, at[0], at[1]),
        )

    return _assert(tf.logical_not(tf.reduce_any(bad)), message)


class ExportSignatures:
    """A task model and its tokenizer, as the two functions the exports serve.

    `id_outputs` takes token ids (what TFLite files and the tensorflow-text-free SavedModel
    run); `text_outputs` takes raw strings and tokenizes them in the graph with the model's
    own vocabulary and casing (`BertPreprocessor`), then post-processes the head's output
    into what a client wants: label names and the top label, per-token tags, an answer
    span, or an embedding.

    Args:
        model: a BertClassifier, BertTokenClassifier, BertSpanLabeler or BertEmbedder
            carrying its vocabulary (a converted or `kbert finetune`d model does).
        sequence_length: int >= 3. Texts are truncated to this many tokens, [CLS] and [SEP]
            included, and padded to it; at most the model's max_sequence_length.
        pair: bool. A classifier reading two texts (`text` and `text_b`); the span labeler
            always reads two (`question` and `context`).
        forward: a function {token_ids, segment_ids, padding_mask} (int32 [B, S]) -> the
            model's outputs, run in place of the model's own call: `kbert serve --precision
            int8` passes the int8 conversion's, and calls `text_outputs` and `id_outputs`
            eagerly (such a function is not traced into an export). Default: the model.
    """

    def __init__(self, model, sequence_length, pair=False, forward=None):
        self.kind = head_kind(model)
        backbone = model.backbone
        sequence_length = check_sequence_length(
            "sequence_length", sequence_length, backbone.max_sequence_length
        )
        check_bool("pair", pair)
        if pair and self.kind != "classifier":
            raise ValueError(f"pair=True is for classifiers (text, text_b). Received a {self.kind}.")
        if forward is not None and not callable(forward):
            raise TypeError(
                f"forward must be a function of the model's id inputs, or None. Received: forward={forward!r}"
            )
        self.model = model
        self.forward = forward
        self.sequence_length = sequence_length
        self.pair = pair or self.kind == "span_labeler"
        self.preprocessor = BertPreprocessor.from_model(model, sequence_length=sequence_length)
        self.label_names = list(getattr(model, "label_names", None) or [])
        if self.kind in ("classifier", "tagger") and not self.label_names:
            self.label_names = [f"label_{i}" for i in range(model.num_classes)]

    @property
    def text_inputs(self):
        return text_input_names(self.kind == "span_labeler", self.pair)

    def output_names(self):
        """The id outputs, in the order the exports list them."""
        if self.kind == "classifier":
            return ("logits", "probabilities") if self.model.activation is None else ("probabilities",)
        return {
            "tagger": ("logits", "probabilities"),
            "span_labeler": ("start_logits", "end_logits"),
            "embedder": ("embeddings",),
        }[self.kind]

    def id_outputs(self, ids, mask, segment_ids):
        """Ids [B, S] int32 -> the head's outputs, float32, plus probabilities where the
        head gives logits."""
        inputs = {"token_ids": ids, "segment_ids": segment_ids, "padding_mask": mask}
        outputs = self.forward(inputs) if self.forward is not None else self.model(inputs, training=False)
        outputs = {k: tf.cast(v, tf.float32) for k, v in outputs.items()}
        if self.kind == "classifier" and "logits" in outputs:
            activation = tf.sigmoid if self.model.multi_label else tf.nn.softmax
            outputs["probabilities"] = activation(outputs["logits"])  # [B, C]
        elif self.kind == "tagger":
            outputs["probabilities"] = tf.nn.softmax(outputs["logits"])  # [B, S, C]
        return outputs

    def checked_id_outputs(self, ids, mask, segment_ids):
        """`id_outputs` behind checks of the id inputs: `mask` and `segment_ids` shaped as
        `ids`, 1 to max_sequence_length positions, and each value inside its table (a mask
        value 0 or 1). A failed check fails the call with an InvalidArgumentError naming the
        input and the value (its example and position), TF Serving's 400. Unchecked, a negative
        id reads the table from its end (a plausible, wrong answer), and the rest fail in some
        node of the model (a GatherV2, a Slice, an add) naming none of the inputs. The TFLite
        converter drops the checks (Assert ops)."""
        backbone = self.model.backbone
        width = tf.shape(ids)[1]
        shapes = [
            _assert(
                tf.reduce_all(tf.equal(tf.shape(other), tf.shape(ids))),
                lambda n=name, o=other: tf.strings.format(
                    f"Input {n} has shape {{}}, and ids {{}}: send ids, mask and segment_ids of one shape, "
                    "[examples, positions].",
                    (tf.shape(o), tf.shape(ids)),
                ),
            )
            for name, other in (("mask", mask), ("segment_ids", segment_ids))
        ]
        shapes.append(
            _assert(
                tf.logical_and(width >= 1, width <= backbone.max_sequence_length),
                lambda: tf.strings.format(
                    "Input ids has {} positions per example: this model takes 1 to "
                    f"{backbone.max_sequence_length} (its max_sequence_length); send that many per example.",
                    (width,),
                ),
            )
        )
        with tf.control_dependencies(shapes):  # first: the range checks index by position
            ranges = [
                _range_check("ids", ids, backbone.vocabulary_size),
                _range_check("mask", mask, 2),
                _range_check("segment_ids", segment_ids, backbone.num_segments),
            ]
        with tf.control_dependencies(ranges):
            ids, mask, segment_ids = tf.identity(ids), tf.identity(mask), tf.identity(segment_ids)
        return self.id_outputs(ids, mask, segment_ids)

    def text_outputs(self, *texts):
        """Strings [B] (two of them for pairs and spans) -> the id outputs plus readable ones."""
        segments = tuple(texts) if len(texts) > 1 else texts[0]
        x = self.preprocessor(segments)  # each [B, S]
        ids, mask, segment_ids = x["token_ids"], x["padding_mask"], x["segment_ids"]
        outputs = self.id_outputs(ids, mask, segment_ids)
        outputs["token_ids"] = ids
        rows = tf.shape(ids)[0]
        if self.kind in ("classifier", "tagger"):
            names = tf.constant(self.label_names)
            probabilities = outputs["probabilities"]
            top = tf.argmax(probabilities, axis=-1, output_type=tf.int32)  # [B] or [B, S]
            if self.kind == "classifier":
                outputs["top_label"] = tf.gather(names, top)  # [B]
                outputs["top_score"] = tf.reduce_max(probabilities, axis=-1)  # [B]
                # One row of names per example: TF Serving's row format needs a batch axis.
                outputs["label_names"] = tf.tile(names[None], tf.stack([rows, 1]))  # [B, C]
            else:
                # Tags and word pieces per token; "" on [CLS], [SEP] and padding.
                special = tf.logical_or(
                    mask == 0, tf.logical_or(ids == self.preprocessor.cls_id, ids == self.preprocessor.sep_id)
                )
                outputs["tags"] = tf.where(special, "", tf.gather(names, top))  # [B, S]
                pieces = tf.gather(tf.constant(self.preprocessor.vocabulary), ids)
                outputs["tokens"] = tf.where(mask == 0, "", pieces)  # [B, S]
        elif self.kind == "span_labeler":
            outputs.update(
                self._best_span(ids, mask, segment_ids, outputs["start_logits"], outputs["end_logits"])
            )
        return outputs

    def _best_span(self, ids, mask, segment_ids, start_logits, end_logits):
        """The highest start + end logit with start <= end < start + MAX_ANSWER_TOKENS, both
        inside the context (segment 1, not its closing [SEP]); its text detokenized."""
        width = tf.shape(ids)[1]
        in_context = tf.logical_and(
            tf.logical_and(segment_ids == 1, mask == 1), ids != self.preprocessor.sep_id
        )  # [B, S]
        scores = start_logits[:, :, None] + end_logits[:, None, :]  # [B, S, S]
        i = tf.range(width)[:, None]
        j = tf.range(width)[None, :]
        shape_ok = tf.logical_and(i <= j, j - i < MAX_ANSWER_TOKENS)  # [S, S]
        valid = tf.logical_and(
            tf.logical_and(in_context[:, :, None], in_context[:, None, :]), shape_ok[None]
        )  # [B, S, S]
        scores = tf.where(valid, scores, tf.constant(-float("inf"), scores.dtype))
        best = tf.argmax(
            tf.reshape(scores, tf.stack([-1, width * width])), axis=-1, output_type=tf.int32
        )  # [B]
        start, end = best // width, best % width
        positions = tf.range(width)[None, :]
        inside = tf.logical_and(positions >= start[:, None], positions <= end[:, None])  # [B, S]
        answer_ids = tf.ragged.boolean_mask(ids, inside)
        answer = self.preprocessor.tokenizer.detokenize(answer_ids)  # [B]
        # A context with no token at all (an empty one) has no span: -1, -1, "".
        found = tf.reduce_any(in_context, axis=1)
        return {
            "start": tf.where(found, start, -1),
            "end": tf.where(found, end, -1),
            "score": tf.where(
                found, tf.reduce_max(tf.reshape(scores, tf.stack([-1, width * width])), -1), 0.0
            ),
            "answer": tf.where(found, answer, ""),
        }

    def endpoint(self, text, batch=None, length=None, checked=True):
        """(function, input_signature) of the `serving_default` endpoint: raw strings in
        when `text`, else token ids [batch, length] (None: free), range-checked in the graph
        (`checked_id_outputs`) unless `checked` is False: for a `forward` called eagerly that
        checks its ids itself (an eager Assert's message is TensorFlow's, not ours)."""
        if text:
            return named_endpoint(self.text_outputs, self.text_inputs), text_signature(self.text_inputs)
        call = self.checked_id_outputs if checked else self.id_outputs
        return named_endpoint(call, EXPORT_ID_INPUTS), id_signature(EXPORT_ID_INPUTS, batch, length)

    def export_archive(self, text):
        """A keras.export.ExportArchive with the model's variables and one `serving_default`
        endpoint: raw strings in when `text`, else token ids. The id archive holds no
        tensorflow-text op (nothing of the tokenizer is traced into it)."""
        archive = keras.export.ExportArchive()
        # No archive.track(model): see conversion.tflite_converter.convert_endpoint.
        function, signature = self.endpoint(text)
        archive.add_endpoint(SERVING_ENDPOINT, function, input_signature=signature)
        return archive
