"""A text-in TFLite model: raw strings in, the tokenizer inside, the head's outputs and the ids out.

Shape legend: B batch, S sequence length, N word pieces of the whole batch, W words of the
batch, K pieces kept for a segment (S - 2 for one text, S - 3 for each text of a pair).

The tokenizer is the model's own `BertPreprocessor` (same vocabulary, casing and normaliser
flatbuffer), but `BertPreprocessor.call` does not run in LiteRT: its ragged packing lowers to
RaggedRange and RaggedGather, its `tf.cond` on long words to an UnsortedSegmentSum custom op
that no registrar provides, and its UTF-8 `tf.Assert` is dropped. This module packs the ids
again with ops that are TFLite builtins, around the preprocessor's public FastBertTokenizer:

1. FastBertTokenizer (custom ops FastBertNormalize and FastWordpieceTokenizeWithOffsets):
   strings [B] -> pieces [N] and row splits [B + 1];
2. the character limit on words (`max_chars_per_word`, counted in characters as
   BertPreprocessor counts them) on the flat pieces, with cumulative sums and gathers
   instead of segment sums and a `tf.cond`: a long word becomes one [UNK];
3. the pieces into a dense [B, K] (custom op RaggedTensorToTensor), truncated there;
4. [CLS], [SEP] and [PAD] placed with `tf.where`; pairs truncated like Google's
   `_truncate_seq_pair`, as BertPreprocessor does.

So the .tflite holds exactly the custom ops in `TEXT_IN_CUSTOM_OPS`, all registered by
`tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS`; everything else is builtin.

Behaviour at serving time (tests/export/test_text_in_tflite.py checks each):
- ids equal BertPreprocessor's at the same sequence length, truncation included: a text
  longer than S - 2 pieces keeps its first S - 2 (a long word counted as its one [UNK]); a
  pair longer than S - 3 is trimmed from its longer text, as `_truncate_seq_pair` does;
- an empty string gives [CLS] [SEP] and padding (a pair of empty strings [CLS] [SEP] [SEP]);
- an empty batch gives outputs with 0 rows (the model runs on one spare row that is not
  returned: LiteRT's UNPACK kernel in the encoder refuses empty tensors);
- invalid UTF-8 does not raise (a .tflite has no assertion op): a word holding invalid
  bytes becomes one [UNK] ("caf\\xc3" -> [UNK]; "abc \\xff\\xfe def" -> abc [UNK] def),
  where BertPreprocessor raises InvalidArgumentError. Decode text before passing it.
"""

import numpy as np
import tensorflow as tf

from keras_bert_impl.conversion.tflite_converter import convert_endpoint
from keras_bert_impl.conversion.input_contract import named_endpoint, text_signature
from keras_bert_impl.tensor_names import SERVING_ENDPOINT, TEXT_INPUT_LAYOUTS, text_input_names
from keras_bert_impl.models import BertClassifier, BertEmbedder, BertSpanLabeler, BertTokenClassifier
from keras_bert_impl.tokenization import BertPreprocessor, is_continuation, piece_text
from keras_bert_impl.validation import check_bool, check_sequence_length

# The custom ops a text-in .tflite holds: tensorflow-text's kernels, which
# `tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS` registers.
TEXT_IN_CUSTOM_OPS = ("FastBertNormalize", "FastWordpieceTokenizeWithOffsets", "RaggedTensorToTensor")
_HEADS = (BertClassifier, BertTokenClassifier, BertSpanLabeler, BertEmbedder)


class _TextInGraph:
    """Strings -> packed ids -> the model, written with ops LiteRT runs."""

    def __init__(self, model, preprocessor):
        self.model = model
        self.preprocessor = preprocessor
        self.sequence_length = preprocessor.sequence_length
        self.max_chars_per_word = preprocessor.max_chars_per_word
        vocabulary = preprocessor.vocabulary
        self.is_suffix = tf.constant([is_continuation(t) for t in vocabulary], tf.bool)
        self.piece_chars = tf.constant([len(piece_text(t)) for t in vocabulary], tf.int32)

    def pieces(self, strings, width):
        """Strings [B] -> (ids [B, width] padded with [PAD] and truncated, lengths [B] before
        truncation)."""
        pre = self.preprocessor
        ragged = pre.tokenizer.tokenize(strings)  # [B, (P)]
        ids = ragged.flat_values  # [N]
        splits = tf.cast(ragged.row_splits, tf.int32)  # [B + 1]
        count = tf.shape(ids)[0]
        # Words: a piece that is not "##" starts one (a row always begins with such a piece).
        starts = tf.logical_not(tf.gather(self.is_suffix, ids))  # [N]
        chars_before = tf.concat([[0], tf.cumsum(tf.gather(self.piece_chars, ids))], axis=0)  # [N + 1]
        first = tf.cast(tf.where(starts)[:, 0], tf.int32)  # [W]
        after_last = tf.concat([first[1:], [count]], axis=0)  # [W]
        word_chars = tf.gather(chars_before, after_last) - tf.gather(chars_before, first)  # [W]
        word = tf.cumsum(tf.cast(starts, tf.int32)) - 1  # [N]
        too_long = tf.gather(word_chars > self.max_chars_per_word, word)  # [N]
        # A long word keeps its first piece, as [UNK], and drops the rest.
        ids = tf.where(too_long, tf.constant(pre.unk_id, ids.dtype), ids)  # [N]
        keep = tf.logical_or(starts, tf.logical_not(too_long))  # [N]
        kept_before = tf.concat([[0], tf.cumsum(tf.cast(keep, tf.int32))], axis=0)  # [N + 1]
        splits = tf.gather(kept_before, splits)  # [B + 1]
        lengths = splits[1:] - splits[:-1]  # [B]
        kept = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(ids, keep), lengths)  # [B, (P)]
        dense = kept.to_tensor(default_value=pre.pad_id, shape=[None, width])  # [B, width]
        return tf.cast(dense, tf.int32), lengths

    def pack(self, *texts):
        """Strings [B] (two for pairs) -> token_ids, segment_ids, padding_mask, each int32 [B, S]."""
        pre = self.preprocessor
        length = self.sequence_length
        positions = tf.range(length)[None, :]  # [1, S]
        if len(texts) == 1:
            a, len_a = self.pieces(texts[0], length - 2)  # [B, S - 2], [B]
            rows = tf.shape(a)[0]
            used = tf.minimum(len_a, length - 2) + 2  # [B]
            token_ids = tf.concat(
                [tf.fill(tf.stack([rows, 1]), pre.cls_id), a, tf.fill(tf.stack([rows, 1]), pre.pad_id)],
                axis=1,
            )  # [B, S]
            token_ids = tf.where(positions == used[:, None] - 1, pre.sep_id, token_ids)
            segment_ids = tf.zeros_like(token_ids)
        else:
            budget = length - 3
            a, len_a = self.pieces(texts[0], budget)  # [B, S - 3], [B]
            b, len_b = self.pieces(texts[1], budget)  # [B, S - 3], [B]
            # Google's _truncate_seq_pair in closed form (BertPreprocessor's truncate_pair_lengths).
            keep_a = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))  # [B]
            keep_b = tf.minimum(len_b, budget - keep_a)  # [B]
            rows = tf.shape(a)[0]
            pad = tf.fill(tf.stack([rows, 2]), pre.pad_id)
            a_at = tf.concat([tf.fill(tf.stack([rows, 1]), pre.cls_id), a, pad], axis=1)  # [B, S]
            # Segment B starts at keep_a + 2: each row reads b at its own offset.
            b_index = tf.clip_by_value(positions - keep_a[:, None] - 2, 0, budget - 1)  # [B, S]
            b_at = tf.gather(b, b_index, batch_dims=1)  # [B, S]
            sep_a = keep_a[:, None] + 1
            used = keep_a + keep_b + 3  # [B]
            token_ids = tf.where(
                positions < sep_a, a_at, tf.where(positions == sep_a, pre.sep_id, b_at)
            )  # [B, S]
            token_ids = tf.where(positions == used[:, None] - 1, pre.sep_id, token_ids)
            segment_ids = tf.cast(positions > sep_a, tf.int32)  # [B, S]
        padding_mask = tf.cast(positions < used[:, None], tf.int32)  # [B, S]
        token_ids = tf.where(padding_mask == 1, token_ids, pre.pad_id)
        return {
            "token_ids": token_ids,
            "segment_ids": segment_ids * padding_mask,
            "padding_mask": padding_mask,
        }

    def empty_row(self):
        """What an empty string packs to: [CLS] [SEP] [PAD]..., each [1, S]."""
        pre = self.preprocessor
        token_ids = np.full([1, self.sequence_length], pre.pad_id, np.int32)
        token_ids[0, :2] = pre.cls_id, pre.sep_id
        padding_mask = (token_ids != pre.pad_id).astype(np.int32)
        return {
            "token_ids": tf.constant(token_ids),
            "segment_ids": tf.constant(np.zeros_like(token_ids)),
            "padding_mask": tf.constant(padding_mask),
        }

    def __call__(self, *texts):
        x = self.pack(*texts)  # each [B, S]
        # LiteRT's UNPACK (the encoder's split of the fused Q/K/V) refuses 0 elements, so the
        # model always sees at least one row: an empty batch runs on one row of [CLS] [SEP]
        # and returns none of it. For B >= 1 this is x itself.
        rows = tf.shape(x["token_ids"])[0]
        spare = self.empty_row()  # each [1, S]
        run_rows = tf.maximum(rows, 1)
        outputs = self.model(
            {k: tf.concat([v, spare[k]], axis=0)[:run_rows] for k, v in x.items()}, training=False
        )
        outputs = {name: tf.cast(value, tf.float32)[:rows] for name, value in outputs.items()}
        outputs.update(x)
        return outputs


def convert_text_in(model, *, sequence_length, pair=False, max_chars_per_word=100):
    """Converts a task model and its tokenizer into one text-in TFLite flatbuffer.

    The .tflite takes strings and returns the model's outputs (float32) plus the ids it
    computed (`token_ids`, `segment_ids`, `padding_mask`, int32 [B, S]), which equal
    `BertPreprocessor.from_model(model, sequence_length=...)`'s. Its signature is
    `serving_default`; the batch is dynamic (LiteRT resizes it), the length fixed. Run it with
    `text_in_interpreter` / `run_text_in`: it needs tensorflow-text's registrar. See the
    module docstring for truncation, empty input and invalid UTF-8.

    Args:
        model: a BertClassifier, BertTokenClassifier, BertSpanLabeler or BertEmbedder
            carrying its vocabulary (a converted or fine-tuned model does).
        sequence_length: int >= 3, at most the model's max_sequence_length. Texts are
            truncated to it, [CLS] and [SEP] included, and padded to it.
        pair: bool. A classifier of text pairs: inputs `text` and `text_b`. A span labeler
            always reads two texts (`question`, `context`); other heads read one (`text`).
        max_chars_per_word: int. Longer words become one [UNK], as in BertPreprocessor.

    Returns:
        bytes: the .tflite flatbuffer.

    Example:
    >>> from keras_bert_impl.checkpoints import convert_checkpoint
    >>> from keras_bert_impl.models import BertEmbedder
    >>> backbone, _ = convert_checkpoint("data/minilm", "huggingface", with_heads=False)
    >>> tflite = convert_text_in(BertEmbedder(backbone), sequence_length=16)
    >>> out = run_text_in(tflite, ["a gripping, funny film"])
    >>> out["token_ids"][0, :7], out["embeddings"].shape
    (array([  101,  1037, 13940,  1010,  6057,  2143,   102], dtype=int32), (1, 384))
    """
    if not isinstance(model, _HEADS):
        raise ValueError(
            "convert_text_in exports a BertClassifier, BertTokenClassifier, BertSpanLabeler or BertEmbedder. "
            f"Received: model={type(model).__name__}"
        )
    sequence_length = check_sequence_length(
        "sequence_length", sequence_length, model.backbone.max_sequence_length
    )
    check_bool("pair", pair)
    if pair and not isinstance(model, BertClassifier):
        raise ValueError(
            "pair=True is for a BertClassifier of text pairs (a BertSpanLabeler always reads two texts). "
            f"Received: pair={pair!r} for a {type(model).__name__}"
        )
    names = text_input_names(isinstance(model, BertSpanLabeler), pair)
    if len(names) == 2 and sequence_length < 4:
        raise ValueError(
            "sequence_length must be >= 4 for two texts ([CLS] A [SEP] [SEP]). Received: "
            f"sequence_length={sequence_length}"
        )
    preprocessor = BertPreprocessor.from_model(
        model, sequence_length=sequence_length, max_chars_per_word=max_chars_per_word
    )
    graph = _TextInGraph(model, preprocessor)

    # Custom ops let tensorflow-text's kernels through; any other op left as custom is an
    # error below, not a file that fails on the device.
    flatbuffer = convert_endpoint(named_endpoint(graph, names), text_signature(names), allow_custom_ops=True)
    unexpected = sorted(set(custom_op_names(flatbuffer)) - set(TEXT_IN_CUSTOM_OPS))
    if unexpected:
        raise ValueError(
            f"The text-in graph holds custom ops that no LiteRT registrar provides: {unexpected}. "
            f"Only {list(TEXT_IN_CUSTOM_OPS)} (tensorflow-text's kernels) are expected."
        )
    return flatbuffer


def op_names(flatbuffer):
    """The distinct operators of a .tflite, read from its flatbuffer: builtin names such as
    "FULLY_CONNECTED", and custom ops by their custom code."""
    from ai_edge_litert import schema_py_generated as schema

    builtin_names = {
        value: name for name, value in vars(schema.BuiltinOperator).items() if not name.startswith("_")
    }
    model = schema.ModelT.InitFromPackedBuf(bytearray(flatbuffer), 0)
    names = set()
    for code in model.operatorCodes:
        builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
        if builtin == schema.BuiltinOperator.CUSTOM:
            custom = code.customCode
            names.add(custom.decode() if isinstance(custom, bytes) else custom)
        else:
            names.add(builtin_names[builtin])
    return sorted(names)


def custom_op_names(flatbuffer):
    """The custom ops of a .tflite (Flex ops included, as "Flex..."), sorted."""
    from ai_edge_litert import schema_py_generated as schema

    builtin_names = {name for name in vars(schema.BuiltinOperator) if not name.startswith("_")}
    return [name for name in op_names(flatbuffer) if name not in builtin_names]


def text_in_interpreter(flatbuffer, num_threads=None):
    """A LiteRT interpreter for a text-in .tflite, with tensorflow-text's kernels registered."""
    import tensorflow_text
    from ai_edge_litert.interpreter import InterpreterWithCustomOps

    return InterpreterWithCustomOps(
        custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS,
        model_content=bytes(flatbuffer),
        num_threads=num_threads,
    )


def run_text_in(flatbuffer_or_interpreter, text, text_b=None):
    """Runs a text-in .tflite (bytes, or an interpreter from `text_in_interpreter`) on a batch.

    Args:
        flatbuffer_or_interpreter: the bytes `convert_text_in` returned, or an interpreter.
        text: a list of str or bytes [B] (questions, for a span labeler).
        text_b: the second texts [B] of a pair (contexts, for a span labeler), else None.

    Returns:
        dict of numpy arrays: the model's outputs and token_ids, segment_ids, padding_mask.
    """
    interpreter = flatbuffer_or_interpreter
    if isinstance(interpreter, (bytes, bytearray)):
        interpreter = text_in_interpreter(interpreter)
    runner = interpreter.get_signature_runner(SERVING_ENDPOINT)
    inputs = set(runner.get_input_details())
    names = next((n for n in TEXT_INPUT_LAYOUTS if set(n) == inputs), None)
    if names is None:
        raise ValueError(f"This .tflite is no text-in model: its inputs are {sorted(inputs)}.")
    texts = [text] if text_b is None else [text, text_b]
    if len(texts) != len(names):
        raise ValueError(
            f"This .tflite reads {len(names)} text input(s) {names}; received {len(texts)}. "
            "Pass text_b for a pair model, and only for one."
        )
    arrays = [
        np.array([t.encode("utf-8") if isinstance(t, str) else t for t in batch], dtype=object)
        for batch in texts
    ]
    if len({a.shape for a in arrays}) != 1:
        raise ValueError(f"text and text_b must have the same length. Received: {[len(a) for a in arrays]}")
    return runner(**dict(zip(names, arrays)))
