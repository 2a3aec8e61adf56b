"""Documents of sentences, streamed from disk one document at a time."""

import csv
import io
import os
import re

from keras_bert_impl import file_paths
from keras_bert_impl.data.corpus_split import CorpusSplit
from keras_bert_impl.validation import check_int

# A review field with no line breaks is cut after . ! or ? followed by space.
# Deliberately simple (no abbreviation list): it only runs on single-line
# fields, and the Pang & Lee reviews already come one sentence per line.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


class PretrainingCorpus:
    """Text files read lazily as documents, each a list of sentence strings.

    Iterating re-reads the files from the start and holds one document at a
    time, so a corpus of any size costs the memory of its longest document.

    Formats:
        "text": Google's create_pretraining_data.py input, one sentence per
            line, blank lines between documents. Lines are stripped; a line of
            only whitespace is a document boundary, as in Google's reader.
            Unlike Google's reader, the end of a file also ends a document
            (Google carries the last document of one file into the next file
            unless the file ends with a blank line).
        "reviews-csv": a CSV such as data/corpora/polarity-en-pang&lee1.csv
            (`"label","review"`, UTF-8 with or without BOM, no header). Each row
            is a document; the review (column `text_column`) is split into
            sentences at its line breaks (the Pang & Lee reviews are stored one
            sentence per line) and, when a review has no line break, after
            `.`, `!` or `?` followed by whitespace. Other columns are ignored.

    Args:
        paths: a path, a glob pattern, or a list of them; local, or on a filesystem of Apache
            Beam's (gs://bucket/corpus/*.txt: `keras_bert_impl.file_paths`).
        format: "text" or "reviews-csv".
        text_column: the CSV column holding the document text (reviews-csv).

    Example:
    >>> corpus = PretrainingCorpus("data/corpora/polarity-en-pang&lee1.csv", format="reviews-csv")
    >>> next(iter(corpus))[:1]
    ["films adapted from comic books have had plenty of success , ..."]
    """

    FORMATS = ("text", "reviews-csv")

    def __init__(self, paths, format="text", text_column=-1):
        if format not in self.FORMATS:
            raise ValueError(f"format must be one of {list(self.FORMATS)}. Received: format={format!r}")
        check_int("text_column", text_column)
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        paths = [os.fspath(p) for p in paths]
        if not paths:
            raise ValueError("PretrainingCorpus needs at least one input file. Received: paths=[]")
        self.paths = self._expand(paths)
        self.format = format
        self.text_column = text_column

    @staticmethod
    def _expand(patterns):
        files, missing = [], []
        for pattern in patterns:
            # A literal file name may contain glob characters (the Pang & Lee
            # corpus names have "&"; others may have "[").
            matches = file_paths.expand(pattern)
            if not matches:
                missing.append(pattern)
            for path in matches:
                if os.path.isdir(path):
                    raise ValueError(
                        f"Input {path!r} is a directory; pass the text files in it (e.g. {path}/*.txt)."
                    )
            files.extend(matches)
        if missing:
            raise FileNotFoundError(f"Input file(s) not found: {missing}")
        return files

    def __iter__(self):
        read = self._text_documents if self.format == "text" else self._csv_documents
        for path in self.paths:
            yield from read(path)

    def check_readable(self):
        """Opens every file and reads its first byte, so an unreadable one is refused, named,
        before any work (a pipeline's workers would otherwise fail on it one by one)."""
        for path in self.paths:
            try:
                with file_paths.open_read(path) as f:
                    f.read(1)
            except OSError as e:
                raise ValueError(
                    f"Input {path!r} cannot be read ({e.strerror or e}). Check its permissions, or "
                    "leave it out of the inputs."
                ) from None

    def scan(self):
        """(documents, sentences) in the corpus, from one cheap pass without tokenization.

        Used to fail fast on an empty corpus and to size the progress bar."""
        documents = sentences = 0
        for document in self:
            documents += 1
            sentences += len(document)
        return documents, sentences

    def splits(self, split_bytes=None):
        """The corpus as `CorpusSplit`s, in file order: each text file cut every `split_bytes`
        bytes (None: one split per file), each reviews CSV whole. `keyed_documents` reads one."""
        if split_bytes is not None:
            check_int("split_bytes", split_bytes, 1)
        splits = []
        for index, path in enumerate(self.paths):
            size = file_paths.size(path)
            step = size if split_bytes is None or self.format != "text" else split_bytes
            starts = range(0, size, step) if size else [0]
            splits.extend(
                CorpusSplit(index, path, start, min(start + step, size) if size else 0) for start in starts
            )
        # The last split of a file runs to its end even where the file has grown since.
        return [
            s._replace(end=None) if i + 1 == len(splits) or splits[i + 1].file_index != s.file_index else s
            for i, s in enumerate(splits)
        ]

    def keyed_documents(self, split):
        """Yields (key, document) for the documents of one `CorpusSplit`. The key, (file index,
        position), is the same whatever the splits: the byte offset of the blank line before a
        text document (0 for a file's first), a CSV document's ordinal in its file. Reading every split of
        `splits(n)` gives the documents of iterating the corpus, in the same order."""
        if self.format != "text":
            for row, document in enumerate(self._csv_documents(split.path)):
                yield (split.file_index, row), document
            return
        for position, document in self._text_documents_in(split.path, split.start, split.end):
            yield (split.file_index, position), document

    def _text_documents_in(self, path, start, end):
        """The text documents whose preceding blank line starts in [start, end) (end None: to
        the end of the file), as (that line's offset, document); the file's first document has
        offset 0 and belongs to the split starting at 0."""
        with file_paths.open_read(path) as f:
            offset = 0
            if start > 0:
                # Start at the first line beginning at or after `start`: the line holding byte
                # start - 1 belongs to the split before.
                f.seek(start - 1)
                offset = start - 1 + len(f.readline())
            document, owner = [], 0 if start == 0 else None
            for raw in iter(f.readline, b""):
                line_offset, offset = offset, offset + len(raw)
                line = _decode(raw, path, f"at byte {line_offset}")
                if line_offset == 0:
                    line = line.lstrip("\ufeff")  # a UTF-8 byte-order mark is not text
                line = line.strip()
                if line:
                    document.append(line)
                    continue
                if document and owner is not None:
                    yield owner, document
                document = []
                if end is not None and line_offset >= end:
                    return
                owner = line_offset if line_offset >= start else None
            if document and owner is not None:
                yield owner, document

    def _text_documents(self, path):
        document = []
        with file_paths.open_read(path) as f:
            for number, raw in enumerate(f, 1):
                line = _decode(raw, path, f"line {number}")
                if number == 1:
                    line = line.lstrip("\ufeff")  # a UTF-8 byte-order mark is not text
                line = line.strip()
                if not line:
                    if document:
                        yield document
                    document = []
                else:
                    document.append(line)
        if document:
            yield document

    def _csv_documents(self, path):
        # csv needs text mode; decoding errors are reported with the row.
        with io.TextIOWrapper(file_paths.open_read(path), encoding="utf-8-sig", newline="") as f:
            # strict: a stray quote is an error, not a field that swallows the rows after it.
            reader = csv.reader(f, strict=True)
            row_number, width = 0, None
            while True:
                try:
                    row = next(reader)
                except StopIteration:
                    return
                except UnicodeDecodeError as e:
                    raise ValueError(
                        f"{path} is not UTF-8 text (near CSV row {row_number + 1}): {e}. "
                        "Convert it to UTF-8 or check that it is the right file."
                    ) from None
                except csv.Error as e:
                    raise ValueError(
                        f"{path}: malformed CSV near row {row_number + 1} (line {reader.line_num}): {e}. "
                        'A quote inside a field is written twice (""); fix or remove the row.'
                    ) from None
                row_number += 1
                if not row:
                    continue
                # Every row as wide as the first: a quote left open or closed early merges or splits
                # reviews, and taking a column anyway would drop or garble them without a word.
                width = width or len(row)
                if len(row) != width:
                    raise ValueError(
                        f"{path} row {row_number} (ending at line {reader.line_num}) has {len(row)} "
                        "field(s) where the "
                        f"first row has {width}: a quote opened and not closed, or a field with a "
                        "comma left unquoted? "
                        'Fix the row (a quote inside a field is written twice: ""), or remove it.'
                    )
                try:
                    text = row[self.text_column]
                except IndexError:
                    raise ValueError(
                        f"{path} row {row_number} has {len(row)} column(s); "
                        f"text_column={self.text_column} is out "
                        'of range. Is this a reviews CSV ("label","text")?'
                    ) from None
                document = split_sentences(text)
                if document:
                    yield document


def split_sentences(text):
    """The reviews-csv rule: line breaks, else sentence-final punctuation."""
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    if len(lines) == 1:
        lines = [s.strip() for s in _SENTENCE_END.split(lines[0]) if s.strip()]
    return lines


def documents_to_text(documents):
    """Documents (lists of sentences) in the "text" format this corpus reads: a sentence per
    line, a blank line between documents."""
    return "\n\n".join("\n".join(document) for document in documents) + "\n"


def _decode(raw, path, where):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path} {where} is not UTF-8 text ({e.reason} at byte {e.start}). Pretraining input must be "
            "UTF-8 plain text, one sentence per line, blank lines between documents."
        ) from None
