"""WordPiece vocabularies: BERT's special tokens, reading and writing vocab.txt, casing.

Plain Python (no TensorFlow): the models read and write the vocabulary that
travels inside a `.keras` file through these functions too, and model code
must not pull in tensorflow-text.
"""

import os
import re

from keras_bert_impl.atomic_write import write_text_atomically

# BERT's five special tokens, in the order a new vocabulary lists them: [PAD]
# first, so that padding is id 0 (what BertPreprocessor and the models pad with).
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# WordPiece marks a piece that continues a word with this prefix ("##ing");
# tensorflow-text calls it the suffix indicator.
SUFFIX_INDICATOR = "##"
# The vocabulary's file name inside a saved model's assets and an export folder.
VOCAB_ASSET = "vocab.txt"
# Strings tokenized per call when a Python loop tokenizes many (task readers):
# large enough to amortise the op, small enough to keep the ragged results modest.
TOKENIZE_CHUNK = 8192
# Bracketed tokens such as [CLS] or [unused3]: not words, so they say nothing about casing.
_BRACKETED = re.compile(r"^\[[A-Za-z0-9_]+\]$")


def read_vocabulary(path):
    """One token per line, in id order. Raises FileNotFoundError naming the path."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"No vocabulary at {path}. The converted model keeps the checkpoint's WordPiece vocab: "
            "put its vocab.txt next to the weights."
        )
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a folder: give the path of its vocab.txt (one token per line).")
    # utf-8-sig: a byte-order mark (Windows editors write one) is not part of the first token,
    # which would otherwise never match and read as missing.
    try:
        with open(path, encoding="utf-8-sig") as f:
            tokens = [line.rstrip("\n").rstrip("\r") for line in f]
    except UnicodeDecodeError:
        raise ValueError(
            f"{path} is not UTF-8 ({_first_undecodable(path)}): a WordPiece vocab.txt is UTF-8, one "
            "token per line. Re-save it as UTF-8, or use the checkpoint's own vocab.txt."
        ) from None
    while tokens and tokens[-1] == "":
        tokens.pop()
    duplicates = duplicate_tokens(tokens)
    if duplicates:  # said here, naming the file, not later by whatever first builds a lookup table
        lines = {token: [i + 1 for i, t in enumerate(tokens) if t == token] for token in duplicates[:3]}
        raise ValueError(
            f"{path} holds {len(duplicates)} token(s) more than once "
            f"({', '.join(f'{t!r} on lines {n}' for t, n in lines.items())}"
            f"{', ...' if len(duplicates) > 3 else ''}): "
            "each token needs one id. Remove the repeated lines, or use the checkpoint's own vocab.txt."
        )
    return tokens


def _first_undecodable(path):
    """Where a file stops being UTF-8: "line N: byte 0xNN"."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        raw.decode("utf-8-sig")
        return "a byte sequence"
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        return f"line {line}: byte {raw[e.start]:#04x}"


def write_vocabulary(tokens, path):
    """Writes vocab.txt (one token per line, in id order) atomically, so a crash never
    leaves a truncated vocabulary behind."""
    tokens = list(tokens)
    bad = [t for t in tokens if not isinstance(t, str) or not t or any(c in t for c in "\r\n")]
    if bad:
        raise ValueError(
            f"Vocabulary tokens must be non-empty strings without line breaks. Received: {bad[:5]!r}"
        )
    duplicates = duplicate_tokens(tokens)
    if duplicates:
        raise ValueError(f"Vocabulary tokens must be unique. Received duplicates: {duplicates[:5]!r}")
    write_text_atomically("\n".join(tokens) + "\n", path)


def vocabulary_is_uncased(tokens):
    """True when no ordinary token has an upper-case letter ([CLS]-style tokens aside)."""
    return not any(t != t.lower() for t in tokens if not _BRACKETED.match(t))


def duplicate_tokens(tokens):
    """Tokens that appear more than once, in order of their second appearance."""
    seen, duplicates = set(), []
    for token in tokens:
        if token in seen:
            duplicates.append(token)
        seen.add(token)
    return duplicates


def load_vocabulary(vocabulary):
    """A token list from a list or a vocab.txt path, checked for what BERT needs: not
    empty, every special token present, no token twice."""
    source = ""
    if isinstance(vocabulary, (str, os.PathLike)):
        source = f" ({os.fspath(vocabulary)})"
        vocabulary = read_vocabulary(vocabulary)
    vocabulary = list(vocabulary)
    if not vocabulary:
        raise ValueError(
            f"The vocabulary{source} is empty; pass a BERT vocab.txt (one WordPiece token a line)."
        )
    missing = [t for t in SPECIAL_TOKENS if t not in vocabulary]
    if missing:
        raise ValueError(
            f"The vocabulary{source} lacks BERT's special tokens {missing}: tokenizing needs "
            f"{list(SPECIAL_TOKENS)} (sequences are packed with [CLS]/[SEP] and padded with [PAD], unknown "
            "words become [UNK], pretraining masks with [MASK]). Use a BERT vocab.txt."
        )
    duplicates = duplicate_tokens(vocabulary)
    if duplicates:
        raise ValueError(
            f"The vocabulary{source} has duplicate entries {duplicates[:10]}; each token must appear once."
        )
    return vocabulary


def special_token_ids(vocabulary, *tokens):
    """{"[PAD]": id, "[UNK]": id, ...} for the five special tokens of a checked vocabulary; given
    `tokens` (some of them), the tuple of their ids, in that order."""
    ids = {token: i for i, token in enumerate(vocabulary)}
    if tokens:
        return tuple(ids[token] for token in tokens)
    return {token: ids[token] for token in SPECIAL_TOKENS}


def piece_text(token):
    """The characters a WordPiece token stands for in normalised text: "##ing" -> "ing"."""
    if token.startswith(SUFFIX_INDICATOR) and token != SUFFIX_INDICATOR:
        return token[len(SUFFIX_INDICATOR) :]
    return token


def is_continuation(token):
    """Whether a WordPiece token continues the word before it ("##ing")."""
    return token.startswith(SUFFIX_INDICATOR) and token != SUFFIX_INDICATOR


def save_vocabulary_asset(dir_path, vocabulary):
    """Writes the vocabulary into a Keras asset folder (`save_assets`). Unchecked, unlike
    `write_vocabulary`: a model keeps whatever vocabulary its checkpoint came with."""
    write_text_atomically("\n".join(vocabulary) + "\n", os.path.join(dir_path, VOCAB_ASSET))


def load_vocabulary_asset(dir_path):
    """The vocabulary of a Keras asset folder (`load_assets`), or None when it holds none."""
    path = os.path.join(dir_path, VOCAB_ASSET)
    return read_vocabulary(path) if os.path.exists(path) else None
