"""Raw strings -> BERT inputs, in the TensorFlow graph (tensorflow-text's FastBertTokenizer).

Shape legend: B batch, S sequence length, P word pieces of a row.

What the tokenization is. Google's BERT `tokenization.py`, as Hugging Face's fast
BertTokenizer (`tokenizers`, Rust) also implements it:

1. clean: drop NUL, U+FFFD and control/format characters (categories Cc, Cf,
   except tab, newline, carriage return); map whitespace (space, \\t, \\n, \\r, Zs,
   and U+2028/U+2029, where Google's and Hugging Face's word splitting breaks too) to a space;
2. uncased vocabularies only: NFD, drop non-spacing marks (Mn), lower-case;
3. split on whitespace, on punctuation (ASCII symbols and Unicode P*) and around
   CJK ideographs;
4. WordPiece (`##` continuations); a word with more than `max_chars_per_word`
   characters, or with no WordPiece cover, becomes one [UNK].

tensorflow-text's own normalizer differs from this (it applies ICU's
NFKC_Casefold, so "…" becomes "...", "ß" "ss", full-width letters ASCII; and it
turns control characters into spaces, splitting "ab\\x07cd"), and its word limit
counts UTF-8 bytes, not characters. So steps 1-2 run as our own codepoint table
compiled into a FastBertNormalizer model (`bert_normalizer_model`), the word
limit is applied to characters after WordPiece (`_unk_long_words`), and tf-text
does steps 3-4. tests/tokenization/ checks the result id for id against
Hugging Face's tokenizer on 52,659 real sentences, on every Unicode codepoint,
and on the hard cases in tests/fixtures/tokenization_hard_cases.json.

Where we differ from Hugging Face's fast tokenizer on purpose (each follows
Google's `tokenization.py`, which Hugging Face's Python BertTokenizer also does):

* Literal "[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]" in the input text are
  text ("[", "sep", "]"), never control tokens: the fast tokenizer matches them
  as added tokens, so user text could inject a segment boundary.
* Pair truncation is Google's `_truncate_seq_pair` (trim the longer segment one
  piece at a time, segment B on ties). `tokenizers`' `longest_first` gives the
  last odd piece to the longer segment instead, B on ties: when the budget is
  odd, both segments exceed half of it and B is at least as long as A, A keeps
  one piece more than B with us and one fewer with `tokenizers`.
* Private-use characters (Co) are kept (a word holding one becomes [UNK]); the
  fast tokenizer deletes them as "control" characters.
* CJK Extension ideographs U+2B820..U+2B91F are split like every other CJK
  ideograph; the fast tokenizer's range table starts that block at U+2B920.
* Characters whose Unicode category changed after Unicode 9 (newer combining
  marks, format characters, punctuation) follow our Unicode tables (Unicode
  14.0.0 on every Python, `bert_normalizer.UNICODE_VERSION`, and ICU's for
  punctuation); the fast
  tokenizer's category tables are older.

Invalid UTF-8 raises InvalidArgumentError ("not valid UTF-8"): tf-text would
quietly turn the bad bytes into spaces or [UNK] and the reference tokenizers
cannot take such input at all.
"""

import warnings

import keras

from keras_bert_impl.backend_support import TOKENIZE_ELSEWHERE, require_tensorflow

# On another backend this says so in one line before TensorFlow is imported, hence the E402
# waivers on the imports below.
require_tensorflow("BertPreprocessor (tensorflow-text's WordPiece kernels)", TOKENIZE_ELSEWHERE)

import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

from keras_bert_impl.tensor_names import MODEL_ID_INPUTS  # noqa: E402
from keras_bert_impl.tokenization.bert_normalizer import bert_normalizer_model  # noqa: E402
from keras_bert_impl.tokenization.vocabulary import (  # noqa: E402
    TOKENIZE_CHUNK,
    is_continuation,
    load_vocabulary,
    load_vocabulary_asset,
    piece_text,
    save_vocabulary_asset,
    special_token_ids,
    vocabulary_is_uncased,
)
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH, check_positive_int  # noqa: E402

# A UTF-8 character is at most 4 bytes, so a word of `max_chars_per_word`
# characters is at most this many times as many bytes.
_MAX_UTF8_BYTES_PER_CHAR = 4


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


_UTF8_ERROR = (
    "BertPreprocessor: input text is not valid UTF-8. Decode the source with its real encoding (e.g. "
    "latin-1 or cp1252) and pass text or UTF-8 bytes; replacing the bad bytes with U+FFFD would silently "
    "delete them, as BERT's text cleaning drops U+FFFD. Invalid bytes are shown as U+FFFD below."
)


def _checked_utf8(strings):
    """`strings` [B], after asserting that every one is valid UTF-8."""
    # ASCII rows are valid by construction; only the others pay for a transcode,
    # which replaces each invalid sequence (bad byte, truncation, overlong form,
    # surrogate, > U+10FFFF) with U+FFFD and leaves valid text byte for byte.
    is_ascii = tf.strings.regex_full_match(strings, "[\\x00-\\x7f]*")
    rows = tf.where(tf.logical_not(is_ascii))[:, 0]
    others = tf.gather(strings, rows)
    repaired = tf.strings.unicode_transcode(
        others, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    invalid = tf.not_equal(others, repaired)
    bad_rows = tf.boolean_mask(rows, invalid)[:1]
    # The message shows the repaired text: raw invalid bytes would make the
    # error message itself undecodable in graph mode.
    bad_text = tf.strings.substr(tf.boolean_mask(repaired, invalid)[:1], 0, 60, unit="UTF8_CHAR")
    if tf.executing_eagerly():
        if bad_rows.shape[0]:
            text = bad_text[0].numpy().decode("utf-8")
            raise tf.errors.InvalidArgumentError(
                None, None, f"{_UTF8_ERROR} First invalid row of the batch: {int(bad_rows[0])}, {text!r}"
            )
        return strings
    check = tf.debugging.Assert(
        tf.logical_not(tf.reduce_any(invalid)),
        [_UTF8_ERROR + " First invalid row of the batch:", bad_rows, bad_text],
        summarize=1,
    )
    with tf.control_dependencies([check]):
        return tf.identity(strings)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertPreprocessor(keras.layers.Layer):
    """Tokenizes and packs one sentence or a sentence pair for a BERT model.

    WordPiece runs in the graph (tensorflow-text FastBertTokenizer with BERT's
    own normalization table, see the module docstring), so the layer works in
    tf.data, `model.fit`/`predict` and exported SavedModels, and gives the ids of
    Google's and Hugging Face's BERT tokenizers. Sequences are packed as
    `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, then padded with [PAD]; pairs
    are truncated like Google's `_truncate_seq_pair`. Input must be valid UTF-8
    (InvalidArgumentError otherwise).

    Args:
        vocabulary: list of tokens, or a path to vocab.txt.
        lowercase: bool or None. Lower-case and strip accents (uncased models);
            None reads it off the vocabulary.
        sequence_length: int, or None for per-batch padding to the longest row.
        max_chars_per_word: int. Longer words (counted in characters after
            normalization) become one [UNK]. 100 as in Hugging Face's BERT
            tokenizers; Google's original `tokenization.py` uses 200.

    Call args:
        inputs: a string tensor [B] (single sentences) or a tuple (A, B) of two;
            or scalar strings (one example, as `tf.data.Dataset.map` passes them
            before batching).

    Returns:
        dict with `token_ids`, `segment_ids`, `padding_mask`, each int32 [B, S]
        ([S] for scalar inputs).

    Example:
    >>> pre = BertPreprocessor("data/minilm/vocab.txt", sequence_length=12)
    >>> pre(tf.constant(["The quick brown fox."]))["token_ids"][0, :7].numpy()
    array([ 101, 1996, 4248, 2829, 4419, 1012,  102], dtype=int32)
    >>> x = pre((["The quick brown fox."], ["It jumps!"]))  # a pair: [CLS] A [SEP] B [SEP] [PAD]
    >>> x["token_ids"].numpy(), x["segment_ids"].numpy(), x["padding_mask"].numpy()
    (array([[  101,  1996,  4248,  2829,  4419,  1012,   102,  2009, 14523,   999,   102,     0]],
    dtype=int32),
     array([[0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0]], dtype=int32),
     array([[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]], dtype=int32))
    """

    def __init__(
        self,
        vocabulary=None,
        lowercase=None,
        sequence_length=DEFAULT_SEQUENCE_LENGTH,
        max_chars_per_word=100,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if sequence_length is not None and (
            isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < 3
        ):
            raise ValueError(
                "sequence_length must be an int >= 3 ([CLS] token [SEP]) or None for per-batch padding. "
                f"Received: sequence_length={sequence_length!r}"
            )
        check_positive_int("max_chars_per_word", max_chars_per_word)
        self.sequence_length = sequence_length
        self.max_chars_per_word = max_chars_per_word
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
        vocabulary = load_vocabulary(vocabulary)
        uncased_vocabulary = vocabulary_is_uncased(vocabulary)
        if lowercase is None:
            lowercase = uncased_vocabulary
        elif bool(lowercase) != uncased_vocabulary:
            # The common mistake: an uncased vocab with lowercase=False sends every
            # capitalised word to [UNK] or odd pieces; a cased vocab with
            # lowercase=True can never produce its upper-case tokens.
            if lowercase:
                cased = [t for t in vocabulary if t != t.lower() and not t.startswith("[")][:3]
                detail = f"the vocabulary has upper-case tokens (e.g. {cased}) but lowercase=True"
            else:
                detail = "the vocabulary has no upper-case tokens but lowercase=False"
            warnings.warn(
                f"BertPreprocessor: {detail}; the casing of the vocabulary and the lowercase setting "
                f"disagree. Pass lowercase={not lowercase} (or lowercase=None to follow the vocabulary) "
                "unless the mismatch is intended.",
                stacklevel=2,
            )
        # A plain attribute, as BertBackbone.set_vocabulary keeps it: no tracker walks its tokens.
        object.__setattr__(self, "vocabulary", vocabulary)
        self.lowercase = bool(lowercase)
        self.pad_id, self.unk_id, self.cls_id, self.sep_id = special_token_ids(
            vocabulary, "[PAD]", "[UNK]", "[CLS]", "[SEP]"
        )
        self._tokenizer = tf_text.FastBertTokenizer(
            vocab=vocabulary,
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            # Byte limit loose enough for any word within the character limit;
            # _unk_long_words applies the character limit itself.
            max_bytes_per_word=_MAX_UTF8_BYTES_PER_CHAR * self.max_chars_per_word,
            fast_bert_normalizer_model_buffer=bert_normalizer_model(self.lowercase),
            support_detokenization=True,
        )
        # Per id: does it continue a word, and how many characters it adds to it.
        self._is_suffix = tf.constant([is_continuation(t) for t in vocabulary], tf.bool)
        self._piece_chars = tf.constant([len(piece_text(t)) for t in vocabulary], tf.int32)

    @property
    def tokenizer(self):
        """The tensorflow-text FastBertTokenizer this layer runs (BERT's normaliser table, the
        vocabulary, a byte limit per word loose enough for `max_chars_per_word`), for code that
        packs its own graph around the same WordPiece step (the text-in TFLite export).
        `tokenize` adds the character limit on words to what it returns."""
        if self.vocabulary is None:
            raise ValueError(
                "BertPreprocessor has no vocabulary: pass vocabulary= (a list or a vocab.txt path)."
            )
        return self._tokenizer

    def plain_tokenizer(self):
        """The same ids without TensorFlow: keras_bert_lite's `WordPieceTokenizer` (plain Python over
        the edge demos' character table, which is written from this layer) on this layer's
        vocabulary, casing and word limit. Its `encode(texts, texts_b, self.sequence_length)` gives
        this layer's `token_ids`, `segment_ids` and `padding_mask` for `str` texts, pairs truncated
        alike (tests/tokenization/test_plain_tokenizer.py holds it to this layer and to Hugging
        Face's tokenizer). It costs about 0.1 ms a sentence where the graph costs about 1 ms a
        call, so `TextPredictor` tokenizes calls of a few texts with it. One WordPiece in plain
        Python for the library and keras_bert_lite: that package imports nothing of the library
        (it runs without TensorFlow and Keras), so the library imports it."""
        from keras_bert_lite.wordpiece_tokenizer import WordPieceTokenizer

        if self.vocabulary is None:
            raise ValueError(
                "BertPreprocessor has no vocabulary: pass vocabulary= (a list or a vocab.txt path)."
            )
        return WordPieceTokenizer(self.vocabulary, self.lowercase, max_chars_per_word=self.max_chars_per_word)

    def tokenize(self, strings):
        """Strings [B] -> ragged WordPiece ids [B, (P)]. Raises InvalidArgumentError on invalid UTF-8."""
        if self.vocabulary is None:
            raise ValueError(
                "BertPreprocessor has no vocabulary: pass vocabulary= (a list or a vocab.txt path)."
            )
        strings = tf.convert_to_tensor(strings)
        if strings.dtype != tf.string or strings.shape.rank not in (None, 1):
            raise ValueError(
                "BertPreprocessor takes a batch of strings of shape [B] (text or UTF-8 bytes). "
                f"Received: dtype={strings.dtype.name}, shape={strings.shape}"
            )
        pieces = self._tokenizer.tokenize(_checked_utf8(strings))  # [B, (P)]
        return self._unk_long_words(pieces)

    def tokenize_lists(self, strings):
        """Python strings -> WordPiece ids as Python lists, one per string, tokenized in
        chunks of TOKENIZE_CHUNK (the task readers' word-by-word alignment uses it)."""
        ids = []
        for first in range(0, len(strings), TOKENIZE_CHUNK):
            ids.extend(
                self.tokenize(tf.constant(strings[first : first + TOKENIZE_CHUNK], tf.string)).to_list()
            )
        return ids

    def _unk_long_words(self, pieces):
        """Words of more than max_chars_per_word characters -> one [UNK], as Google and Hugging Face do.

        tf-text's own limit counts bytes, so it is set loose (4 bytes per
        character) and words are measured here: a word is a non-`##` piece and
        the `##` pieces after it; its characters are the sum of its pieces'.
        """
        ids = pieces.values  # [sum P]
        starts = tf.logical_not(tf.gather(self._is_suffix, ids))
        word = tf.cumsum(tf.cast(starts, tf.int32)) - 1  # a row always begins a word
        long_word = tf.math.segment_sum(tf.gather(self._piece_chars, ids), word) > self.max_chars_per_word

        def unk_them():
            too_long = tf.gather(long_word, word)
            keep = tf.logical_or(starts, tf.logical_not(too_long))
            unk = tf.where(too_long, tf.constant(self.unk_id, ids.dtype), ids)
            return tf.ragged.boolean_mask(pieces.with_values(unk), pieces.with_values(keep))

        # Long words are rare: skip the masking when there are none.
        return tf.cond(tf.reduce_any(long_word), unk_them, lambda: pieces)

    def detokenize(self, token_ids):
        """Ids [B, S] (dense, or ragged as `tokenize` gives them) -> strings [B], special tokens
        and padding dropped."""
        if isinstance(token_ids, tf.RaggedTensor):
            # convert_to_tensor refuses a RaggedTensor ("object of type 'RaggedTensor' has no len()").
            token_ids = tf.cast(token_ids, tf.int32)
        else:
            token_ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(token_ids, tf.int32))
        keep = tf.logical_and(
            token_ids != self.pad_id, tf.logical_and(token_ids != self.cls_id, token_ids != self.sep_id)
        )
        return self._tokenizer.detokenize(tf.ragged.boolean_mask(token_ids, keep))

    def __call__(self, inputs, *args, **kwargs):
        # Keras reads a plain list as several positional inputs; a list of
        # Python strings here is one batch of sentences.
        def to_tensor(x):
            if isinstance(x, (str, bytes)):
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
            raise ValueError(
                "BertPreprocessor takes a string tensor or a tuple (text_a, text_b), not a dict."
            )
        segments = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        if len(segments) not in (1, 2):
            raise ValueError(f"BertPreprocessor packs one or two segments. Received {len(segments)}.")
        segments = [tf.convert_to_tensor(s) for s in segments]
        if all(s.shape.rank == 0 for s in segments):
            # One example (what tf.data's unbatched map passes): packed as a batch of one,
            # returned without the batch axis.
            packed = self.call(tuple(s[None] for s in segments))
            return {key: value[0] for key, value in packed.items()}  # each [S]
        pieces = [self.tokenize(s) for s in segments]  # each [B, (P)]
        if self.sequence_length is not None:
            budget = self.sequence_length - len(segments) - 1  # room left by [CLS] and the [SEP]s
            if len(pieces) == 1:
                pieces = [pieces[0][:, :budget]]
            else:
                lengths = [p.row_lengths() for p in pieces]
                keep_a, keep_b = truncate_pair_lengths(
                    lengths[0], lengths[1], tf.constant(budget, lengths[0].dtype)
                )
                pieces = [_take_first(pieces[0], keep_a), _take_first(pieces[1], keep_b)]
        rows = pieces[0].nrows()
        cls = tf.fill(tf.stack([rows, 1]), tf.constant(self.cls_id, tf.int32))  # [B, 1]
        sep = tf.fill(tf.stack([rows, 1]), tf.constant(self.sep_id, tf.int32))  # [B, 1]
        parts = [cls, pieces[0], sep] + ([pieces[1], sep] if len(pieces) == 2 else [])
        packed = tf.concat(parts, axis=1)  # [B, (n)]
        token_ids = packed.to_tensor(default_value=self.pad_id, shape=[None, self.sequence_length])  # [B, S]
        width = tf.shape(token_ids)[1]
        used = tf.cast(packed.row_lengths(), tf.int32)  # [B]
        padding_mask = tf.sequence_mask(used, width, dtype=tf.int32)  # [B, S]
        if len(pieces) == 1:
            segment_ids = tf.zeros_like(token_ids)
        else:
            # Segment B starts after [CLS] A [SEP].
            start_b = tf.cast(pieces[0].row_lengths(), tf.int32) + 2  # [B]
            segment_ids = tf.cast(tf.range(width)[None, :] >= start_b[:, None], tf.int32) * padding_mask
        return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}

    def compute_output_spec(self, inputs):
        # Declared rather than traced: a model being loaded calls this layer
        # symbolically before load_assets has restored the vocabulary.
        first = inputs[0] if isinstance(inputs, (tuple, list)) else inputs
        shape = (self.sequence_length,) if len(first.shape) == 0 else (first.shape[0], self.sequence_length)
        return {key: keras.KerasTensor(shape, dtype="int32") for key in MODEL_ID_INPUTS}

    def save_assets(self, dir_path):
        save_vocabulary_asset(dir_path, self.vocabulary)

    def load_assets(self, dir_path):
        self.set_vocabulary(load_vocabulary_asset(dir_path), self.lowercase)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "lowercase": self.lowercase,
                "sequence_length": self.sequence_length,
                "max_chars_per_word": self.max_chars_per_word,
            }
        )
        return config
