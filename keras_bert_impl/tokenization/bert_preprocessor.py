"""Raw strings -> BERT inputs, in the TensorFlow graph (tensorflow-text's FastBertTokenizer).

Shape legend: B batch, S sequence length.
"""

import os

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.checkpoints.vocabulary import read_vocabulary, vocabulary_is_uncased

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
VOCAB_ASSET = "vocab.txt"


def truncate_pair_lengths(len_a, len_b, budget):
    """Lengths Google's `_truncate_seq_pair` leaves: it trims one token at a time
    from the longer segment (from segment B on ties) until the pair fits `budget`.
    In closed form: a = min(len_a, max(budget - len_b, ceil(budget / 2))), b = min(len_b, budget - a)."""
    half_up = (budget + 1) // 2
    keep_a = tf.minimum(len_a, tf.maximum(budget - len_b, half_up))
    keep_b = tf.minimum(len_b, budget - keep_a)
    return keep_a, keep_b


def _take_first(ragged, lengths):
    positions = tf.ragged.range(ragged.row_lengths())
    return tf.ragged.boolean_mask(ragged, positions < tf.cast(lengths, positions.dtype)[:, None])


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertPreprocessor(keras.layers.Layer):
    """Tokenizes and packs one sentence or a sentence pair for a BERT model.

    WordPiece runs in the graph (tensorflow-text FastBertTokenizer: BERT's basic
    tokenization, then WordPiece with `##` continuations and [UNK]), so the layer
    works in tf.data, `model.fit`/`predict` and exported SavedModels. Sequences
    are packed as `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`; pairs are
    truncated longest-first like Google's `_truncate_seq_pair`.

    Args:
        vocabulary: list of tokens, or a path to vocab.txt.
        lowercase: bool or None. Lower-case and strip accents (uncased models);
            None reads it off the vocabulary.
        sequence_length: int, or None for per-batch padding to the longest row.

    Call args:
        inputs: a string tensor [B] (single sentences) or a tuple (A, B) of two.

    Returns:
        dict with `token_ids`, `segment_ids`, `padding_mask`, each int32 [B, S].

    Example:
    >>> pre = BertPreprocessor("data/minilm/vocab.txt", sequence_length=16)
    >>> pre(tf.constant(["The quick brown fox."]))["token_ids"][0, :6]
    [101, 1996, 4248, 2829, 4419, 1012]
    """

    def __init__(self, vocabulary=None, lowercase=None, sequence_length=128, **kwargs):
        super().__init__(**kwargs)
        if sequence_length is not None and (
            isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < 3
        ):
            raise ValueError(
                "sequence_length must be an int >= 3 ([CLS] token [SEP]) or None for per-batch padding. "
                f"Received: sequence_length={sequence_length!r}"
            )
        self.sequence_length = sequence_length
        self.lowercase = lowercase
        self.vocabulary = None
        if vocabulary is not None:
            self.set_vocabulary(vocabulary, lowercase)

    @classmethod
    def from_model(cls, model, **kwargs):
        """A preprocessor with the vocabulary and casing saved with a converted model."""
        backbone = getattr(model, "backbone", model)
        if getattr(backbone, "vocabulary", None) is None:
            raise ValueError(
                "This model carries no vocabulary. Convert it with `kbert convert` (which keeps the "
                "checkpoint's vocab.txt) or pass vocabulary= explicitly."
            )
        return cls(backbone.vocabulary, lowercase=backbone.lowercase, **kwargs)

    def set_vocabulary(self, vocabulary, lowercase=None):
        if isinstance(vocabulary, (str, os.PathLike)):
            vocabulary = read_vocabulary(os.fspath(vocabulary))
        vocabulary = list(vocabulary)
        missing = [t for t in SPECIAL_TOKENS if t not in vocabulary]
        if missing:
            raise ValueError(f"The vocabulary lacks BERT's special tokens {missing}; use a BERT vocab.txt.")
        seen, duplicates = set(), []
        for token in vocabulary:
            if token in seen:
                duplicates.append(token)
            seen.add(token)
        if duplicates:
            raise ValueError(f"The vocabulary has duplicate entries {duplicates[:10]}; each token must appear once.")
        if lowercase is None:
            lowercase = vocabulary_is_uncased(vocabulary)
        self.vocabulary = vocabulary
        self.lowercase = bool(lowercase)
        ids = {t: i for i, t in enumerate(vocabulary)}
        self.pad_id, self.cls_id, self.sep_id = ids["[PAD]"], ids["[CLS]"], ids["[SEP]"]
        self._tokenizer = tf_text.FastBertTokenizer(
            vocab=vocabulary,
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            lower_case_nfd_strip_accents=self.lowercase,
            support_detokenization=True,
        )

    def tokenize(self, strings):
        """Strings [B] -> ragged WordPiece ids [B, (pieces)]."""
        if self.vocabulary is None:
            raise ValueError("BertPreprocessor has no vocabulary: pass vocabulary= (a list or a vocab.txt path).")
        return self._tokenizer.tokenize(tf.convert_to_tensor(strings, tf.string))

    def detokenize(self, token_ids):
        """Ids [B, S] -> strings [B], special tokens and padding dropped."""
        token_ids = tf.convert_to_tensor(token_ids, tf.int32)
        if not isinstance(token_ids, tf.RaggedTensor):
            token_ids = tf.RaggedTensor.from_tensor(token_ids)
        keep = tf.logical_and(token_ids != self.pad_id, tf.logical_and(token_ids != self.cls_id, token_ids != self.sep_id))
        return self._tokenizer.detokenize(tf.ragged.boolean_mask(token_ids, keep))

    def __call__(self, inputs, *args, **kwargs):
        # Keras reads a plain list as several positional inputs; a list of
        # Python strings here is one batch of sentences.
        def to_tensor(x):
            if isinstance(x, str):
                x = [x]
            if isinstance(x, list) and all(isinstance(t, (str, bytes)) for t in x):
                return tf.constant(x, tf.string)
            return x

        if isinstance(inputs, tuple):
            inputs = tuple(to_tensor(x) for x in inputs)
        else:
            inputs = to_tensor(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs):
        if isinstance(inputs, dict):
            raise ValueError("BertPreprocessor takes a string tensor or a tuple (text_a, text_b), not a dict.")
        segments = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        if len(segments) not in (1, 2):
            raise ValueError(f"BertPreprocessor packs one or two segments. Received {len(segments)}.")
        pieces = [self.tokenize(s) for s in segments]
        lengths = [p.row_lengths() for p in pieces]
        special = len(segments) + 1
        if self.sequence_length is not None:
            budget = tf.constant(self.sequence_length - special, lengths[0].dtype)
            if len(pieces) == 1:
                pieces = [_take_first(pieces[0], tf.minimum(lengths[0], budget))]
            else:
                keep_a, keep_b = truncate_pair_lengths(lengths[0], lengths[1], budget)
                pieces = [_take_first(pieces[0], keep_a), _take_first(pieces[1], keep_b)]
        token_ids, segment_ids = tf_text.combine_segments(pieces, self.cls_id, self.sep_id)
        width = self.sequence_length
        shape = [None, width]
        return {
            "token_ids": token_ids.to_tensor(default_value=self.pad_id, shape=shape),
            "segment_ids": tf.cast(segment_ids.to_tensor(default_value=0, shape=shape), tf.int32),
            "padding_mask": tf.cast(tf.ones_like(token_ids).to_tensor(default_value=0, shape=shape), tf.int32),
        }

    def compute_output_spec(self, inputs):
        # Declared rather than traced: a model being loaded calls this layer
        # symbolically before load_assets has restored the vocabulary.
        first = inputs[0] if isinstance(inputs, (tuple, list)) else inputs
        shape = (first.shape[0], self.sequence_length)
        return {key: keras.KerasTensor(shape, dtype="int32") for key in ("token_ids", "segment_ids", "padding_mask")}

    def save_assets(self, dir_path):
        with open(os.path.join(dir_path, VOCAB_ASSET), "w", encoding="utf-8") as f:
            f.write("\n".join(self.vocabulary) + "\n")

    def load_assets(self, dir_path):
        self.set_vocabulary(os.path.join(dir_path, VOCAB_ASSET), self.lowercase)

    def get_config(self):
        config = super().get_config()
        config.update({"lowercase": self.lowercase, "sequence_length": self.sequence_length})
        return config
