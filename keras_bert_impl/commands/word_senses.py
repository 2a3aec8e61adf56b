"""`kbert word-senses`: the contextual vectors of one word across sentences, as a picture."""

import os

from keras_bert_impl.commands.encoder_flags import MODEL_FLAG
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command
from keras_bert_impl.commands.text_lines import check_text_file, read_lines
from keras_bert_impl.commands.output_files import overwrite_flag, refuse_existing
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH


_HELP = "Plot one word's contextual vectors across the sentences of one or more files."
_DESCRIPTION = (
    "Find WORD (as a whole word) in the lines of each --file, take its vector in every sentence (the mean "
    "over its wordpieces at --layer), and write a PCA scatter coloured by file, with a snippet of the "
    "first sentences beside their points. Senses of a word form separate clouds."
)
# (flag, add_argument keywords), in `--help`'s order.
_FLAG_TABLE = (
    ("word", dict(metavar="WORD", help="One word, e.g. bank or play.")),
    (
        "--file",
        dict(
            action="append",
            required=True,
            help="UTF-8 text, one sentence per line; repeat to compare sources (one colour each).",
        ),
    ),
    MODEL_FLAG,
    ("--output", dict(required=True, help="PNG to write.")),
    overwrite_flag(),
    ("--layer", dict(type=int, default=-1, help="0 = embeddings (no context), -1 = last layer (default).")),
    ("--max-sentences", dict(type=int, default=200, help="Sentences with WORD used per file. Default 200.")),
    ("--annotate", dict(type=int, default=12, help="How many points get a sentence snippet. Default 12.")),
    (
        "--seq-len",
        dict(type=int, default=DEFAULT_SEQUENCE_LENGTH, help=f"Default {DEFAULT_SEQUENCE_LENGTH}."),
    ),
)


def add_parser(subparsers):
    return add_command(subparsers, "word-senses", run, _HELP, _DESCRIPTION, _FLAG_TABLE)


def run(args):
    if not args.output.lower().endswith(".png"):
        raise UsageError(f"--output must end in .png. Received: {args.output!r}")
    refuse_existing(args, "output")
    if len(args.word.split()) != 1:
        raise UsageError(f"WORD must be one word without spaces. Received: {args.word!r}")
    if args.max_sentences < 2:
        raise UsageError(f"--max-sentences must be at least 2. Received: {args.max_sentences}")
    sentences, groups = _sentences(args)
    from keras_bert_impl.inspection.embedding_plot import nearest_neighbour_agreement, plot_word_senses

    vectors, rows = _vectors(args, sentences)
    names = [os.path.basename(groups[r]) for r in rows]
    plot_word_senses(
        vectors,
        [sentences[r] for r in rows],
        args.word,
        args.output,
        groups=names if len(args.file) > 1 else None,
        annotate=args.annotate,
    )
    print(
        f"Wrote {args.output} ({len(vectors)} occurrences of {args.word!r} in "
        f"{len(set(rows.tolist()))} sentences)"
    )
    if len(set(names)) > 1:
        agreement = nearest_neighbour_agreement(vectors, names)
        counts = ", ".join(f"{name} {names.count(name)}" for name in sorted(set(names)))
        print(
            f"Nearest-neighbour agreement of the files ({counts}): {agreement:.1%} of occurrences have "
            "their nearest other occurrence (cosine) in the same file"
        )
    return 0


def _sentences(args):
    """(the lines of each --file holding WORD, at most --max-sentences a file; the file of each)."""
    needle = args.word.lower()
    sentences, groups = [], []
    for path in args.file:
        check_text_file(path, "--file")
        # A cheap text filter first; the model's own tokenization decides the whole-word matches.
        found = [line for line in read_lines(path, "--file") if needle in line.lower()][: args.max_sentences]
        sentences += found
        groups += [path] * len(found)
    if len(sentences) < 2:
        raise UsageError(
            f"WORD {args.word!r} occurs in {len(sentences)} line(s) of --file: the picture needs at least 2."
        )
    return sentences, groups


def _vectors(args, sentences):
    """(WORD's vectors at --layer, the sentence of each) from --model."""
    from keras_bert_impl.commands.model_files import check_sequence_length, load_backbone
    from keras_bert_impl.inspection.word_vectors import word_vectors

    backbone, _ = load_backbone(args.model)
    if not -(backbone.num_layers + 1) <= args.layer <= backbone.num_layers:
        raise UsageError(f"--layer {args.layer} is out of range for this {backbone.num_layers}-layer model.")
    check_sequence_length(args.seq_len, backbone)
    try:
        vectors, rows = word_vectors(
            backbone, args.word, sentences, layer=args.layer, sequence_length=args.seq_len
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    if len(vectors) < 2:
        raise UsageError(
            f"WORD {args.word!r} occurs as a whole word only once: the picture needs at least 2."
        )
    return vectors, rows
