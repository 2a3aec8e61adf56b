"""`kbert vocab`: learn a WordPiece vocab.txt from text files."""

import os
import sys
import time

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command, add_flags, in_flag_names
from keras_bert_impl.commands.output_files import add_overwrite_flag, refuse_existing


_HELP = "Learn a BERT WordPiece vocab.txt from text files."
_DESCRIPTION = (
    "Stream text files line by line, split them into words as BertPreprocessor does "
    "(uncased: lower-case and strip accents first), and learn a WordPiece vocabulary with "
    "tensorflow-text's learner. The file starts with [PAD] [UNK] [CLS] [SEP] [MASK] ([PAD] is id 0), "
    "then the [unusedN] placeholders, then every character and the learned subwords. It is written "
    "atomically: an interrupted run leaves no partial file."
)
# (flag, add_argument keywords) after FILES, in `--help`'s order.
_FLAG_TABLE = (
    (
        "--size",
        dict(
            type=int,
            required=True,
            help="Largest vocabulary size, special and [unusedN] tokens included. The learner stops at the "
            "first vocabulary within 5%% below it; a corpus too small for it at --min-count gives fewer "
            "tokens (reported).",
        ),
    ),
    ("--output", dict(required=True, help="Path of the vocab.txt to write (one token per line).")),
    (
        "--cased",
        dict(
            action="store_true",
            help="Keep case and accents (a cased model). Default: uncased, i.e. lower-cased and accents "
            "stripped (NFD), as Google's uncased BERT.",
        ),
    ),
    (
        "--num-unused",
        dict(
            type=int,
            default=0,
            metavar="K",
            help="Reserve K placeholder tokens [unused0]..[unusedK-1] after the special tokens, to repurpose "
            "for task markers later without resizing the embeddings (Google's vocabularies reserve 994). "
            "Default 0.",
        ),
    ),
    (
        "--min-count",
        dict(
            type=int,
            default=10,
            help="A subword must occur at least this many times to be learned (tensorflow-text's "
            "lower_thresh). Default 10; lower it for small corpora.",
        ),
    ),
    (
        "--max-unique-chars",
        dict(
            type=int,
            default=1000,
            help="Keep the N most frequent characters; words with rarer ones are not counted. Default 1000.",
        ),
    ),
    ("--quiet", dict(action="store_true", help="Print only the final summary.")),
)


def add_parser(subparsers):
    """Registers `vocab` on the `kbert` subparsers; returns its parser."""
    parser = add_command(subparsers, "vocab", run, _HELP, _DESCRIPTION)
    parser.add_argument(
        "files", nargs="+", metavar="FILES", help="UTF-8 text files to learn from (any line layout)."
    )
    add_flags(parser, _FLAG_TABLE[:2])  # --size, --output
    add_overwrite_flag(parser)
    add_flags(parser, _FLAG_TABLE[2:])
    return parser


# The VocabularyBuilder's argument names in its messages, and the flags a kbert user gave.
_FLAGS = {
    "vocab_size": "--size",
    "max_unique_chars": "--max-unique-chars",
    "min_count": "--min-count",
    "num_unused": "--num-unused",
}


def run(args):
    refuse_existing(args, "output")
    if os.path.isdir(args.output):  # found before learning, which takes minutes on a real corpus
        raise UsageError(
            f"--output {args.output} is a folder: give the path of the vocab.txt to write, e.g. "
            f"{os.path.join(args.output, 'vocab.txt')}."
        )
    from keras_bert_impl.tokenization.vocabulary import write_vocabulary
    from keras_bert_impl.tokenization.vocabulary_builder import VocabularyBuilder

    started = time.monotonic()

    def log(message):
        if not args.quiet:
            print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    try:
        builder = VocabularyBuilder(
            vocab_size=args.size,
            lowercase=not args.cased,
            num_unused=args.num_unused,
            min_count=args.min_count,
            max_unique_chars=args.max_unique_chars,
            log=log,
        )
        vocabulary = builder.build(args.files)
    except (ValueError, FileNotFoundError) as e:
        print(f"kbert vocab: {in_flag_names(str(e), _FLAGS)}", file=sys.stderr)
        return 2
    write_vocabulary(vocabulary, args.output)
    _report(args, builder, vocabulary)
    return 0


def _report(args, builder, vocabulary):
    casing = "cased" if args.cased else "uncased"
    print(f"Wrote {len(vocabulary)} tokens ({casing}, target {args.size}) to {args.output}")
    # Said here too: --quiet hides the log line, and a Latin-1 file learns "caf".
    if builder.invalid_utf8_lines:
        print(
            f"Note: {builder.invalid_utf8_lines} of {builder.lines_read} lines were not valid UTF-8 and lost "
            "their bad bytes (café became caf): if the files are in another encoding, convert them (e.g. "
            "iconv -f latin1 -t utf-8) and run kbert vocab again."
        )
    if len(vocabulary) < args.size * 0.95:
        print(
            f"Note: the corpus fills only {len(vocabulary)} of {args.size} tokens at --min-count "
            f"{args.min_count}; lower --min-count or add text for a larger vocabulary."
        )
