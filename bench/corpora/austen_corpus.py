"""Jane Austen's six novels (Debian's r-cran-janeaustenr) as a pretraining text file.

../shared/DATA.md lists two unlabeled corpora: the Pang & Lee full reviews and the Austen
novels of the Debian package r-cran-janeaustenr. That package stores the novels as R
character vectors (one element per printed line, "" between paragraphs) in R's lazy-load
database `data/Rdata.rdb` with its index `data/Rdata.rdx`. This script reads them with the
`rdata` package (the bench extra) and writes Google's create_pretraining_data.py input
format, which `kbert pretrain --corpus FILE` and `kbert pretrain-data` read as `text`:
one sentence per line, a blank line between documents. A document is one chapter, as
BERT's BookCorpus documents were whole books' running text, not single paragraphs.

The lazy-load layout (R's `makeLazyLoadDB`): the .rdx file is a gzip-compressed R
serialization of a list whose `variables` maps each object's name to (offset, length) in
the .rdb file; there each object is a 4-byte big-endian uncompressed length followed by
its zlib-compressed serialization.

Cleaning: the title pages, "VOLUME" and "CHAPTER" headings are dropped (a heading starts
a new document); underscores that mark italics (`_them_`) are removed; the lines of a
paragraph are joined and the paragraph is split into sentences after `.`, `!` or `?`
(and any closing quotes or brackets) followed by whitespace and a capital letter or an
opening quote, except after the honorifics and initials the novels use (Mr., Mrs., Dr.,
St., Col., Esq., Rev., Hon., Wm., single capitals). Casing is kept; an uncased vocabulary
lower-cases at tokenization time.

    make data-austen        # fetches the package, checks it against bench/corpora/austen.sha256, then runs:
    .venv/bin/python -m bench.corpora.austen_corpus --package data/austen/janeaustenr \\
        --output data/austen/austen.txt
"""

import argparse
import gzip
import os
import re
import struct
import sys
import warnings
import zlib

from keras_bert_impl.atomic_write import write_text_atomically
from keras_bert_impl.data import documents_to_text

from bench.common import AUSTEN

# The order of publication; the .rdx lists them alphabetically.
NOVELS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion")
_HEADING = re.compile(r"^(CHAPTER|Chapter|VOLUME|Volume)\s+([IVXLC]+|\d+)\.?$")
_NOT_SENTENCE_END = ("Mr", "Mrs", "Dr", "St", "Col", "Esq", "Rev", "Hon", "Wm", "Capt", "Messrs")
# A sentence ends at . ! or ? (plus closing quotes/brackets) before whitespace and a capital
# or an opening quote; the look-behind test for honorifics is done in split_paragraph.
_BOUNDARY = re.compile(r"""([.!?]["'\u201d\u2019)\]]*)\s+(?=["'\u201c\u2018(]?[A-Z])""")


def read_lazy_load_db(folder):
    """{name: list of str} of every object in folder/Rdata.rdx + Rdata.rdb (R's lazy-load database)."""
    import rdata

    index_path, data_path = os.path.join(folder, "Rdata.rdx"), os.path.join(folder, "Rdata.rdb")
    for path in (index_path, data_path):
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{path} is missing: --package must be the janeaustenr folder of r-cran-janeaustenr "
                "(usr/lib/R/site-library/janeaustenr, holding data/Rdata.rdx); run `make data-austen`."
            )
    with warnings.catch_warnings():
        # rdata names R's bare serialization format "RDS" and warns that it assumed it.
        warnings.simplefilter("ignore", UserWarning)
        with open(index_path, "rb") as f:
            index = rdata.conversion.convert(rdata.parser.parse_data(gzip.decompress(f.read())))
        with open(data_path, "rb") as f:
            blob = f.read()
        objects = {}
        for name, (offset, length) in index["variables"].items():
            chunk = blob[int(offset) : int(offset) + int(length)]
            expected = struct.unpack(">I", chunk[:4])[0]
            raw = zlib.decompress(chunk[4:])
            if len(raw) != expected:
                raise ValueError(
                    f"{data_path}: object {name!r} unpacks to {len(raw)} bytes, its header says {expected}."
                )
            objects[str(name)] = [
                str(line) for line in rdata.conversion.convert(rdata.parser.parse_data(raw))
            ]
    return objects


def split_paragraph(paragraph):
    """Sentences of one paragraph (see the module docstring for the rule)."""
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(paragraph):
        words = paragraph[start : match.start(1)].split()
        last = words[-1] if words else ""
        if match.group(1).startswith(".") and (last in _NOT_SENTENCE_END or re.fullmatch(r"[A-Z]", last)):
            continue
        sentences.append(paragraph[start : match.end(1)].strip())
        start = match.end()
    sentences.append(paragraph[start:].strip())
    return [s for s in sentences if s]


def chapters(lines):
    """Documents (lists of sentences) of one novel: the text between chapter headings,
    without the title matter before the first one."""
    documents, paragraphs, paragraph, seen_chapter = [], [], [], False

    def end_paragraph():
        if paragraph:
            paragraphs.append(" ".join(paragraph).replace("_", " "))
            paragraph.clear()

    def end_document():
        end_paragraph()
        if seen_chapter and paragraphs:
            documents.append([s for p in paragraphs for s in split_paragraph(" ".join(p.split()))])
        paragraphs.clear()

    for line in lines:
        line = line.strip()
        if _HEADING.match(line):
            end_document()
            seen_chapter = seen_chapter or line.upper().startswith("CHAPTER")
        elif not line:
            end_paragraph()
        else:
            paragraph.append(line)
    end_document()
    return documents


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--package",
        default=os.path.join(AUSTEN, "janeaustenr"),
        help="The janeaustenr folder of the unpacked Debian package.",
    )
    parser.add_argument("--output", default=os.path.join(AUSTEN, "austen.txt"))
    args = parser.parse_args(argv)
    novels = read_lazy_load_db(os.path.join(args.package, "data"))
    missing = [n for n in NOVELS if n not in novels]
    if missing:
        sys.exit(f"{args.package}: the database lacks {missing}; found {sorted(novels)}.")
    documents = [(name, doc) for name in NOVELS for doc in chapters(novels[name])]
    write_text_atomically(documents_to_text(doc for _, doc in documents), args.output)
    sentences = sum(len(doc) for _, doc in documents)
    words = sum(len(s.split()) for _, doc in documents for s in doc)
    per_novel = {n: sum(1 for name, _ in documents if name == n) for n in NOVELS}
    print(f"Wrote {args.output}: {len(documents)} chapters {per_novel}, {sentences} sentences, {words} words")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
