"""Reading the text files the inspection commands take: one text per line, UTF-8 (a
byte-order mark allowed), read lazily so that files of any size stream through."""

import sys

from keras_bert_impl import file_paths
from keras_bert_impl.commands.errors import UsageError


def check_text_file(path, flag):
    """Raises UsageError unless `path` is a non-empty UTF-8 text file; returns its line count.
    (A pass of its own, so a bad file is refused before any model is loaded or output written.)"""
    if not file_paths.is_file(path):
        raise UsageError(f"{flag} {path!r}: no such file.")
    count = 0
    for _ in read_lines(path, flag):
        count += 1
    if count == 0:
        raise UsageError(f"{flag} {path!r} is empty: give a file with one text per line.")
    return count


def non_blank_texts(path, flag):
    """(the non-blank lines of a text file checked by `check_text_file`, how many blank lines it
    holds); a file of blank lines only is a UsageError."""
    count = check_text_file(path, flag)
    texts = [line for line in read_lines(path, flag) if line.strip()]
    if not texts:
        raise UsageError(f"{flag} {path!r} has only blank lines: give a file with one text per line.")
    return texts, count - len(texts)


def read_lines(path, flag):
    """Yields every line of `path` (without its line end; "-" is stdin; a remote path, gs://...,
    through `file_paths`), blank ones included,
    so that output row i belongs to input line i + 1. Invalid UTF-8 is a UsageError naming
    the line."""
    if path == "-":
        yield from _decoded(sys.stdin.buffer, "stdin", flag)
        return
    with file_paths.open_read(path) as f:
        yield from _decoded(f, path, flag)


def _decoded(f, path, flag):
    # Lines end at \n, \r\n or a lone \r (old Mac files; Python's universal newlines): read at \n
    # only, a file of \r-ended lines was one text, and its many inputs one prediction.
    number = 0
    for physical, raw in enumerate(f, 1):
        if physical == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            start = raw.rfind(b"\r", 0, e.start) + 1  # the line the byte is on, counting lone \r's
            line = number + raw.count(b"\r", 0, start) + 1
            raise UsageError(
                f"{flag} {path}:{line} is not valid UTF-8 (byte {e.start - start}: "
                f"{raw[e.start : e.start + 4]!r}). Convert the file to UTF-8, e.g. iconv -f latin1 -t utf-8."
            ) from None
        for line in _universal_lines(text):
            number += 1
            yield line


def _universal_lines(text):
    """The lines of `text` (a chunk read up to \n) without their ends."""
    if text.endswith("\n"):
        text = text[:-1]
        if text.endswith("\r"):
            text = text[:-1]
    elif text.endswith("\r"):  # the file's last line, \r-ended
        text = text[:-1]
    return text.split("\r")
