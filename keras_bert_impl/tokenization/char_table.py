"""BERT's character table for tokenizers outside TensorFlow (android_demo's Java, web_demo's JavaScript).

An app that tokenizes for itself must give the ids BertPreprocessor gives. Java's and
JavaScript's Unicode tables are whatever version the device ships (Java 17: Unicode 13;
Android: its ICU; Chromium: its ICU), while ours are Unicode 14.0.0 on every Python
(`bert_normalizer.UNICODE_VERSION`) for normalisation and tensorflow-text's ICU for
punctuation. So the apps read this table instead of asking their platform, and every
codepoint behaves the same on every device. It is written from the pipeline itself:

* `R` ranges: characters BERT's cleaning deletes (`bert_normalizer.normalize_char`);
* `W` ranges: characters that separate words without a token of their own: those cleaning
  turns into a space (U+2028 and U+2029 among them), and any that tensorflow-text's splitter
  takes for whitespace although cleaning keeps them (none today; the measurement below
  would find them);
* `F` lines: uncased models only, the character's NFD-strip-accents-lower-case form
  (`normalize_char(c, lowercase=True)`; `-` when it vanishes, e.g. a combining accent);
* `S` ranges: characters split off as words of their own (punctuation and CJK
  ideographs), measured by running BertPreprocessor's tokenizer on "a{c}b" for every
  codepoint that cleaning keeps, so the set is tensorflow-text's (its ICU knows 38
  punctuation marks newer than Unicode 14), not a re-derivation.

    python -m keras_bert_impl.tokenization.char_table --output PATH

tests/export/test_android_logic.py regenerates it and compares it with the committed copy
(android_demo/app/src/main/assets/bert_unicode.txt), and the Java tokenizer built on it is
held id for id to BertPreprocessor.
"""

import argparse
import warnings

import numpy as np
import tensorflow as tf

from keras_bert_impl.atomic_write import write_text_atomically
from keras_bert_impl.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert_impl.tokenization.bert_normalizer import UNICODE_VERSION, normalize_char
from keras_bert_impl.tokenization.vocabulary import TOKENIZE_CHUNK, is_continuation

FORMAT_VERSION = 1


def _codepoints():
    return [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def _ranges(cps):
    """Sorted codepoints -> [(first, last)] runs (surrogates, never present, do not break a run)."""
    runs = []
    for cp in cps:
        if runs and (cp == runs[-1][1] + 1 or (runs[-1][1] == 0xD7FF and cp == 0xE000)):
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return runs


def word_breaks(vocabulary, kept):
    """The codepoints of `kept` that BertPreprocessor's tokenizer splits off as words of their
    own, and those it splits on as whitespace: (split, whitespace).

    "a{c}b" is one word (one piece that does not continue a word) unless c breaks it: three
    words when c is split off, two when c is taken for whitespace. The preprocessor is cased
    so that c reaches the splitting step unchanged."""
    with warnings.catch_warnings():
        # An uncased vocabulary with lowercase=False is the point here: BertPreprocessor warns about it.
        warnings.simplefilter("ignore", UserWarning)
        preprocessor = BertPreprocessor(vocabulary, lowercase=False, sequence_length=None)
    starts = np.array([not is_continuation(t) for t in preprocessor.vocabulary])
    split, whitespace = [], []
    for first in range(0, len(kept), TOKENIZE_CHUNK):
        chunk = kept[first : first + TOKENIZE_CHUNK]
        ids = preprocessor.tokenize(tf.constant([f"a{chr(cp)}b".encode() for cp in chunk]))
        words = tf.math.reduce_sum(tf.cast(tf.gather(starts, ids), tf.int32), axis=1).numpy()
        split.extend(cp for cp, n in zip(chunk, words) if n == 3)
        whitespace.extend(cp for cp, n in zip(chunk, words) if n == 2)
        unexpected = [hex(cp) for cp, n in zip(chunk, words) if n not in (1, 2, 3)]
        if unexpected:
            raise ValueError(f"'a{{c}}b' gave neither 1, 2 nor 3 words for codepoints {unexpected[:10]}")
    return split, whitespace


def build_table(vocabulary):
    """The table's text (see the module docstring); `vocabulary` is a vocab.txt path or token list."""
    removed, space, kept, fold = [], [], [], []
    for cp in _codepoints():
        char = chr(cp)
        cleaned = normalize_char(char, lowercase=False)
        if cleaned == "":
            removed.append(cp)
        elif cleaned == " ":
            space.append(cp)
        else:
            kept.append(cp)
            folded = normalize_char(char, lowercase=True)
            if folded != char:
                fold.append((cp, folded))
    split, tf_text_space = word_breaks(vocabulary, kept)
    space = sorted(space + tf_text_space)
    lines = [
        f"# keras_bert_impl BERT character table, format {FORMAT_VERSION}: written by "
        "python -m keras_bert_impl.tokenization.char_table (see its docstring).",
        f"# unicodedata {UNICODE_VERSION}; {len(removed)} removed, {len(space)} space, "
        f"{len(split)} split, {len(fold)} folded when uncased.",
        "# R/W/S FIRST LAST: removed / word-separating / split-off codepoint ranges (hex, inclusive);",
        "# F CP TARGET: uncased form, TARGET '-' (vanishes) or codepoints joined by '.' (hex).",
    ]
    for tag, cps in (("R", removed), ("W", space), ("S", split)):
        lines += [f"{tag} {a:X} {b:X}" for a, b in _ranges(cps)]
    lines += [f"F {cp:X} {'.'.join(f'{ord(c):X}' for c in folded) or '-'}" for cp, folded in fold]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument(
        "--vocabulary",
        default="data/minilm/vocab.txt",
        help="any BERT vocab.txt (the split test only needs 'a', 'b' and [UNK]); default %(default)s",
    )
    parser.add_argument("--output", required=True, help="where to write the table (written atomically)")
    args = parser.parse_args(argv)
    text = build_table(args.vocabulary)
    write_text_atomically(text, args.output)
    print(f"wrote {args.output} ({len(text.splitlines())} lines)")


if __name__ == "__main__":
    main()
