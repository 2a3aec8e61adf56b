"""Reading a WordPiece vocab.txt and telling its casing."""

import os
import re

SPECIAL = re.compile(r"^\[[A-Za-z0-9_]+\]$")


def read_vocabulary(path):
    """One token per line, in id order. Raises FileNotFoundError naming the path."""
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"No vocabulary at {path}. The converted model keeps the checkpoint's WordPiece vocab: "
            "put its vocab.txt next to the weights."
        )
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n").rstrip("\r") for line in f]
    while tokens and tokens[-1] == "":
        tokens.pop()
    return tokens


def vocabulary_is_uncased(tokens):
    """True when no ordinary token has an upper-case letter ([CLS]-style specials aside)."""
    return not any(t != t.lower() for t in tokens if not SPECIAL.match(t))


def duplicate_tokens(tokens):
    """Tokens that appear more than once, in order of their second appearance."""
    seen, duplicates = set(), []
    for token in tokens:
        if token in seen:
            duplicates.append(token)
        seen.add(token)
    return duplicates
