"""Learning a BERT WordPiece vocab.txt from text files with tensorflow-text's learner.

The learning itself is tensorflow-text's (`tools/wordpiece_vocab/
wordpiece_tokenizer_learner_lib.py`, the algorithm behind
`bert_vocab_from_dataset`); this module feeds it words split exactly the way
`BertPreprocessor` will split them at run time, and picks its count threshold
with fewer passes.
"""

import collections
import dataclasses
import math
import os

from keras_bert_impl.backend_support import require_tensorflow

# On another backend this says so in one line before TensorFlow is imported, hence the E402
# waivers on the imports below.
require_tensorflow(
    "VocabularyBuilder (tensorflow-text's WordPiece learner)",
    "Build the vocabulary in a TensorFlow process; vocab.txt is plain text every backend reads.",
)

import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402
from tensorflow_text.python.ops.bert_tokenizer import BasicTokenizer  # noqa: E402
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner  # noqa: E402

from keras_bert_impl.tokenization.bert_normalizer import bert_normalizer_model  # noqa: E402
from keras_bert_impl.tokenization.vocabulary import SPECIAL_TOKENS, SUFFIX_INDICATOR  # noqa: E402
from keras_bert_impl.validation import check_bool, check_int, check_probability  # noqa: E402

# Progress while counting: every this many batches (~200k lines at the default batch size).
_LOG_EVERY_BATCHES = 200


@dataclasses.dataclass(eq=False)  # a worker, not a value: two builders are compared by identity
class VocabularyBuilder:
    r"""Learns a WordPiece vocabulary from text files, BERT's reserved tokens first.

    Text is streamed line by line through tf.data and normalised as Google's
    BERT `tokenization.py` does, which is what `BertPreprocessor` runs:
    control and format characters, NUL and U+FFFD dropped, whitespace
    (including Unicode space separators and U+2028/U+2029) made a space, and for uncased
    vocabularies NFD, accents (Mn) stripped and lower-cased. It is then split
    into words as BERT does (whitespace, ASCII symbols and Unicode
    punctuation, CJK ideographs), counted, and handed to tensorflow-text's
    WordPiece learner. The normalisation is the preprocessor's own
    codepoint table (`bert_normalizer.bert_normalizer_model`) run by
    tensorflow-text's FastBertNormalizer: tf-text's default normalisers apply
    ICU's NFKC case folding ("…" -> "...", "ß" -> "ss") and turn control
    characters into spaces, and even NFD + lower-casing in the graph differs
    from the run-time rule (ICU lower-cases a final capital sigma to "ς", and
    its Unicode tables class some codepoints differently from Python's), so
    they would learn pieces the run-time tokenizer never produces. The vocabulary is `[PAD] [UNK] [CLS] [SEP]
    [MASK]`, then `[unused0..K-1]`, then every character (bare and `##`-prefixed) and the
    learned subwords by descending count.

    tensorflow-text's `learn()` binary-searches a count threshold over
    [lower_thresh, highest word count]: about 16 passes of its pure-Python
    learner, 76-257 s for the 1.2M-word Pang & Lee reviews on our shared
    2-core machine.
    The vocabulary shrinks as the threshold grows, roughly as a power of it,
    so we start at `min_count`, double until the vocabulary fits, and then
    interpolate in log-log space inside that bracket, with the same
    `learn_with_thresh` passes: 3 passes there (thresholds 10, 20, 14), the
    same 7695-token vocabulary as tf-text's `learn()`. Like tf-text, we stop
    at the first vocabulary within `slack_ratio` below `vocab_size`; unlike
    tf-text's search, which can end on a vocabulary larger than asked for,
    the result never exceeds `vocab_size`.

    Args:
        vocab_size: int. Largest vocabulary to produce, reserved tokens included.
        lowercase: bool. True for an uncased vocabulary (lower-case and strip
            accents before learning), False for cased.
        num_unused: int. How many `[unusedN]` placeholder tokens to reserve
            after the special tokens (Google's vocabularies reserve 994).
        min_count: int. A subword must occur at least this often to be learned
            (tf-text's `lower_thresh`; its default is 10). A corpus too small to
            fill `vocab_size` at this count gives a smaller vocabulary: lower it.
        max_token_length: int. Longer words are not counted (tf-text default 50).
        max_unique_chars: int. Keep only this many distinct characters, most
            frequent first; words with other characters are not counted
            (tf-text default 1000).
        slack_ratio: float in [0, 1). Accept a vocabulary this fraction below
            `vocab_size` (tf-text default 0.05).
        batch_size: int. Lines per tf.data batch while counting.
        log: optional callable taking a progress message (str).

    Example:
    >>> from keras_bert_impl.tokenization import write_vocabulary
    >>> with open("reviews.txt", "w") as f:
    ...     _ = f.write("a gripping film, a funny film.\n" * 20 + "the films drag on.\n" * 20)
    >>> vocab = VocabularyBuilder(vocab_size=60, lowercase=True).build(["reviews.txt"])
    >>> len(vocab), vocab[:5], vocab[24:31]  # reserved tokens, characters, words, then ##characters
    (50, ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], ['film', 'drag', 'films', 'funny', 'gripping', 'on',
    'the'])
    >>> write_vocabulary(vocab, "vocab.txt")
    """

    vocab_size: int
    lowercase: bool = True
    num_unused: int = 0
    min_count: int = 10
    max_token_length: int = 50
    max_unique_chars: int = 1000
    slack_ratio: float = 0.05
    batch_size: int = 1024
    log: object = None

    def __post_init__(self):
        check_int("num_unused", self.num_unused, 0)
        check_int("vocab_size", self.vocab_size, len(SPECIAL_TOKENS) + self.num_unused + 1)
        check_int("min_count", self.min_count, 1)
        check_int("max_token_length", self.max_token_length, 1)
        check_int("max_unique_chars", self.max_unique_chars, 1)
        check_int("batch_size", self.batch_size, 1)
        check_bool("lowercase", self.lowercase)
        check_probability("slack_ratio", self.slack_ratio)
        self.log = self.log or (lambda message: None)
        # Only the splitting: BasicTokenizer(lower_case=True) would normalise with ICU's
        # NFKC_Casefold, not BERT's rule (see the class docstring).
        self._normalizer = tf_text.FastBertNormalizer(model_buffer=bert_normalizer_model(self.lowercase))
        self._splitter = BasicTokenizer(lower_case=False)
        self.invalid_utf8_lines = 0
        self.lines_read = 0  # by the last count_words, which the count above is a share of

    @property
    def reserved_tokens(self):
        return list(SPECIAL_TOKENS) + [f"[unused{i}]" for i in range(self.num_unused)]

    def split_words(self, lines):
        """Strings [N] -> ragged words [N, (words)], as BertPreprocessor splits them."""
        # The preprocessor's own normalisation table, so the words counted are the
        # words the run-time tokenizer will see, codepoint for codepoint.
        return self._splitter.tokenize(self._normalizer.normalize(lines))

    def count_words(self, files):
        """Streams the files and counts their words. Returns a `collections.Counter` (str -> int)."""
        if isinstance(files, (str, os.PathLike)):
            files = [files]
        files = [os.fspath(f) for f in files]
        if not files:
            raise ValueError("No input files. Pass at least one text file to learn the vocabulary from.")
        for path in files:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"No text file at {path!r}.")

        def words_of(lines):
            # Invalid bytes become U+FFFD, which BERT's cleaning then drops, so
            # one bad byte cannot stop a long run; the lines are counted and reported.
            clean = tf.strings.unicode_transcode(
                lines, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
            )
            invalid = tf.reduce_sum(tf.cast(tf.not_equal(clean, lines), tf.int64))
            return self.split_words(clean).flat_values, invalid, tf.size(lines)

        counts = collections.Counter()
        self.invalid_utf8_lines = self.lines_read = 0
        for path in files:
            dataset = (
                tf.data.TextLineDataset(path)
                .batch(self.batch_size)
                .map(words_of, num_parallel_calls=tf.data.AUTOTUNE)
            )
            lines = words_seen = 0
            for batch, (words, invalid, count) in enumerate(dataset.as_numpy_iterator(), start=1):
                counts.update(words)
                self.invalid_utf8_lines += int(invalid)
                lines += int(count)
                words_seen += len(words)
                if batch % _LOG_EVERY_BATCHES == 0:
                    self.log(f"{path}: {lines} lines, {words_seen} words so far")
            self.log(f"{path}: {lines} lines, {words_seen} words")
            self.lines_read += lines
        if self.invalid_utf8_lines:
            self.log(f"{self.invalid_utf8_lines} lines had invalid UTF-8; their bad bytes were dropped")
        counts = collections.Counter({word.decode("utf-8"): n for word, n in counts.items()})
        if not counts:
            raise ValueError(f"The input files {files} contain no words to learn a vocabulary from.")
        return counts

    def learn(self, word_counts):
        """Word counts (mapping or (word, count) pairs) -> vocabulary (list of str)."""
        word_counts = list(dict(word_counts).items())
        if not word_counts:
            raise ValueError("word_counts is empty: there is nothing to learn a vocabulary from.")
        reserved = self.reserved_tokens
        params = learner.Params(
            upper_thresh=None,
            lower_thresh=self.min_count,
            num_iterations=4,
            max_input_tokens=int(5e6),
            max_token_length=self.max_token_length,
            max_unique_chars=self.max_unique_chars,
            vocab_size=self.vocab_size,
            slack_ratio=self.slack_ratio,
            include_joiner_token=True,
            joiner=SUFFIX_INDICATOR,
            reserved_tokens=reserved,
        )
        # The same input filtering as tf-text's learn().
        words = learner.get_input_words(word_counts, reserved, self.max_token_length)
        allowed = learner.get_allowed_chars(words, self.max_unique_chars)
        words = learner.filter_input_words(words, allowed, params.max_input_tokens)
        if not words:
            raise ValueError(
                f"No word is at most max_token_length={self.max_token_length} characters long; nothing to "
                "learn from."
            )
        highest = max(count for _, count in words)
        target, floor = self.vocab_size, self.vocab_size * (1 - self.slack_ratio)
        passes = {}

        def at(threshold):
            if threshold not in passes:
                passes[threshold] = learner.learn_with_thresh(words, threshold, params)
                self.log(f"count threshold {threshold}: {len(passes[threshold])} tokens")
            return passes[threshold]

        def fits(vocab):
            return len(vocab) <= target

        low = self.min_count
        if fits(at(low)):
            return at(low)  # the largest vocabulary this corpus gives at min_count
        # Invariant from here: at(low) is too big, at(high) fits.
        high = low
        while True:
            high = min(2 * high, highest + 1)
            if fits(at(high)):
                break
            if high > highest:
                # Above the highest count only characters are left.
                raise ValueError(
                    f"vocab_size={self.vocab_size} is smaller than this corpus's alphabet: {len(at(high))} "
                    "tokens are reserved tokens and single characters (bare and ##-prefixed). Raise "
                    "vocab_size or lower max_unique_chars."
                )
            low = high
        while len(at(high)) < floor and high - low > 1:
            # Vocabulary size falls off roughly as a power of the threshold, so
            # interpolate in log-log space for the middle of the accepted range
            # (regula falsi), kept strictly inside the bracket.
            goal = (target + floor) / 2
            size_low, size_high = len(at(low)), len(at(high))
            slope = math.log(size_high / size_low) / math.log(high / low)
            guess = (
                round(math.exp(math.log(low) + math.log(goal / size_low) / slope))
                if slope < 0
                else (low + high) // 2
            )
            middle = min(max(guess, low + 1), high - 1)
            if fits(at(middle)):
                high = middle
            else:
                low = middle
        return at(high)

    def build(self, files):
        """Count the files' words and learn the vocabulary (list of str)."""
        return self.learn(self.count_words(files))
