"""BERT's character table (bert_unicode.txt) read into what `WordPieceTokenizer` looks up per
character, without TensorFlow or Keras.

The table is the one android_demo's Java and web_demo's JavaScript tokenizers read, written by
`python -m keras_bert_impl.tokenization.char_table` from BertPreprocessor itself: the characters
BERT's cleaning removes (R), those that separate words (W), those split off as words of their own
(S: punctuation and CJK ideographs, as tensorflow-text's ICU has them) and, for uncased models,
each character's folded form (F). Python's own `unicodedata` is not asked: its Unicode version
depends on the Python, the table's does not. This package's copy is the Android asset byte for
byte (tests/lite/test_wordpiece_tokenizer.py).
"""

import os

FORMAT_VERSION = 1
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bert_unicode.txt")
CODEPOINTS = 0x110000

# Per-codepoint classes of `CharTable.kinds`.
KEEP, REMOVED, SPACE, SPLIT = 0, 1, 2, 3
_KINDS = {"R": REMOVED, "W": SPACE, "S": SPLIT}


class CharTable:
    """bert_unicode.txt as `kinds` (bytearray [0x110000]: KEEP, REMOVED, SPACE or SPLIT per
    codepoint) and `folds` ({codepoint: str}: the uncased form, "" where it vanishes).

    Args:
        path: a bert_unicode.txt of format 1 (default: this package's copy).

    Example:
    >>> table = CharTable()
    >>> table.kinds[ord(",")] == SPLIT, table.kinds[0x200B] == REMOVED, table.folds[ord("É")]
    (True, True, 'e')
    """

    def __init__(self, path=PATH):
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        if not lines[0].startswith("#") or f"format {FORMAT_VERSION}:" not in lines[0]:
            raise ValueError(
                f"{path!r} is not a BERT character table of format {FORMAT_VERSION} (first line: "
                f"{lines[0][:80]!r}): pass the bert_unicode.txt that `python -m "
                "keras_bert_impl.tokenization.char_table` writes."
            )
        self.kinds = bytearray(CODEPOINTS)
        self.folds = {}
        for number, line in enumerate(lines, 1):
            if not line or line.startswith("#"):
                continue
            parts = line.split(" ")
            try:
                if parts[0] in _KINDS and len(parts) == 3:
                    first, last = int(parts[1], 16), int(parts[2], 16)
                    self.kinds[first : last + 1] = bytes([_KINDS[parts[0]]]) * (last + 1 - first)
                elif parts[0] == "F" and len(parts) == 3:
                    target = "" if parts[2] == "-" else "".join(chr(int(h, 16)) for h in parts[2].split("."))
                    self.folds[int(parts[1], 16)] = target
                else:
                    raise ValueError
            except ValueError:
                raise ValueError(
                    f"{path}:{number}: not a line of a BERT character table: {line[:80]!r} (expected "
                    "'R|W|S FIRST LAST' or 'F CP TARGET', hexadecimal codepoints)."
                ) from None
