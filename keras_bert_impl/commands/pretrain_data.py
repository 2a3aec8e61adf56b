"""`kbert pretrain-data`: text files -> sharded TFRecords of BERT MLM + NSP examples."""

import os
import sys
import time

from keras_bert_impl import file_paths
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command, add_old_spelling, in_flag_names
from keras_bert_impl.commands.runner_flags import LOCAL, add_runner_flags, beam_options, check_runner_flags
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH

_HELP = "Create BERT pretraining TFRecords (MLM + NSP) from text files."
DESCRIPTION = """\
Create BERT pretraining examples (masked LM + next-sentence prediction) from raw
text, following Google's create_pretraining_data.py, and write them as sharded
TFRecords with Google's feature names (input_ids, input_mask, segment_ids,
masked_lm_positions, masked_lm_ids, masked_lm_weights, next_sentence_labels;
next_sentence_labels 0 = IsNext, 1 = NotNext). The input streams through a
bounded buffer of documents, so memory does not grow with the corpus. Shards
appear under their final names only when everything is written; DIR also gets
pretraining.json with the settings. Read them back for BertPretrainer.fit with
keras_bert_impl.data.PretrainingRecordReader.from_directory(DIR).dataset(...).
"""


# (flag, add_argument keywords), in `--help`'s order: the inputs, then the example settings.
_FLAGS = (
    (
        "files",
        dict(
            nargs="+",
            metavar="FILES",
            help="Input files or glob patterns. --format text: one sentence per line, a blank line between "
            'documents. --format reviews-csv: one document per row ("label","text").',
        ),
    ),
    (
        "--vocab",
        dict(
            required=True,
            help="WordPiece vocab.txt (must contain [PAD] [UNK] [CLS] [SEP] [MASK]); casing is read off it.",
        ),
    ),
    ("--output", dict(required=True, metavar="DIR", help="Directory for the shards and pretraining.json.")),
    (
        "--format",
        dict(
            default="text",
            choices=["text", "reviews-csv"],
            help="Input format (default: text). reviews-csv splits each review into sentences at its line "
            "breaks, or after . ! ? when it has none.",
        ),
    ),
    (
        "--seq-len",
        dict(
            type=int,
            default=DEFAULT_SEQUENCE_LENGTH,
            help="Packed sequence length, [CLS] A [SEP] B [SEP] "
            f"(default: {DEFAULT_SEQUENCE_LENGTH}; at least 5).",
        ),
    ),
    (
        "--max-predictions",
        dict(
            type=int,
            default=20,
            help="Most masked-LM targets per sequence (default: 20, Google's for 128; use 80 for 512).",
        ),
    ),
    (
        "--masked-lm-prob",
        dict(
            type=float,
            default=0.15,
            help="Fraction of tokens to mask, in (0, 1); of "
            "those 80%% become [MASK], 10%% a random token, 10%% stay (default: 0.15).",
        ),
    ),
    (
        "--short-seq-prob",
        dict(
            type=float,
            default=0.1,
            help="Probability that a document uses a random shorter target length, in [0, 1] (default: 0.1).",
        ),
    ),
    (
        "--dupe-factor",
        dict(
            type=int,
            default=10,
            help="Passes over the corpus, each with new pairs and masks (default: 10). Use 1 with "
            "--dynamic-masking.",
        ),
    ),
    (
        "--whole-word-masking",
        dict(
            action="store_true",
            help="Mask all WordPieces of a word together (a piece and its following ## pieces).",
        ),
    ),
    (
        "--google-nsp",
        dict(
            action="store_true",
            help="Google's exact pairing, which forces NotNext for one-sentence chunks (about 54%% NotNext "
            "on movie reviews). Default: a fair 50/50 coin for every pair.",
        ),
    ),
    (
        "--dynamic-masking",
        dict(
            action="store_true",
            help="Write unmasked examples (no masked_lm_* features); masks are then drawn afresh every "
            "epoch by PretrainingRecordReader(..., masker=PretrainingMasker(...)).",
        ),
    ),
    (
        "--seed",
        dict(
            type=int,
            default=12345,
            help="Random seed; the same seed gives the same records (default: 12345, Google's).",
        ),
    ),
    ("--num-shards", dict(type=int, default=4, help="Number of output TFRecord files (default: 4).")),
    (
        "--document-buffer-size",
        dict(
            type=int,
            default=1000,
            help="Documents held in memory: the shuffle window and the pool NotNext segments are drawn "
            "from (default: 1000). A corpus that fits is processed exactly as Google does.",
        ),
    ),
    (
        "--shuffle-buffer-size",
        dict(type=int, default=10000, help="Examples held to shuffle the output (default: 10000)."),
    ),
    (
        "--randomness",
        dict(
            choices=["stream", "keyed"],
            default=None,
            help="stream (default with --runner local): one random generator over the streamed documents, "
            "Google's draws. keyed (always with a Beam runner): each document's draws keyed by (seed, "
            "pass, document), NotNext segments from its own split, so every runner and worker count "
            "gives the same examples.",
        ),
    ),
    (
        "--split-bytes",
        dict(
            type=int,
            default=None,
            metavar="N",
            help="keyed only: cut text files into splits of about N bytes at document boundaries "
            "(default: one split per file). A split is one worker's task and the pool of its NotNext "
            "segments.",
        ),
    ),
)
# The spellings of Google's create_pretraining_data.py, still taken with a note: (old, new).
_OLD_SPELLINGS = (("--max-seq-length", "--seq-len"), ("--max-predictions-per-seq", "--max-predictions"))
# PretrainingExampleBuilder's argument names in its messages, and the flags a kbert user gave.
_ARGUMENT_FLAGS = {
    "max_seq_length": "--seq-len",
    "max_predictions_per_seq": "--max-predictions",
    "masked_lm_prob": "--masked-lm-prob",
    "short_seq_prob": "--short-seq-prob",
    "dupe_factor": "--dupe-factor",
    "document_buffer_size": "--document-buffer-size",
    "split_bytes": "--split-bytes",
    "num_shards": "--num-shards",
    "shuffle_buffer_size": "--shuffle-buffer-size",
}


def add_parser(subparsers):
    parser = add_command(subparsers, "pretrain-data", run, _HELP, DESCRIPTION, _FLAGS)
    for old, new in _OLD_SPELLINGS:
        add_old_spelling(parser, old, new, type=int)
    add_runner_flags(parser)
    parser.add_argument("--overwrite", action="store_true", help="Replace pretraining shards already in DIR.")
    parser.add_argument("--quiet", action="store_true", help="No progress bar.")
    return parser


def run(args):
    # Imported here so `kbert --help` does not pay for TensorFlow.
    from keras_bert_impl.data import PretrainingCorpus, PretrainingExampleBuilder

    try:
        check_runner_flags(args)
        # First: remote paths (gs://...) are read with the runner's options.
        options = beam_options(args) if args.runner != LOCAL else None
        settings = _settings(args)
        corpus = PretrainingCorpus(args.files, format=args.format)
        corpus.check_readable()
        builder = PretrainingExampleBuilder(**settings)
        if args.runner != LOCAL:
            return _run_pipeline(args, options, corpus, dict(settings, vocabulary=builder.vocabulary))
        return _write_locally(args, corpus, builder)
    except (ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"kbert pretrain-data: {in_flag_names(str(e), _ARGUMENT_FLAGS)}", file=sys.stderr)
        return 2


def _settings(args):
    """PretrainingExampleBuilder's arguments from the flags."""
    return dict(
        vocabulary=file_paths.local_copy(args.vocab),
        max_seq_length=args.seq_len,
        max_predictions_per_seq=args.max_predictions,
        masked_lm_prob=args.masked_lm_prob,
        short_seq_prob=args.short_seq_prob,
        dupe_factor=args.dupe_factor,
        whole_word_masking=args.whole_word_masking,
        balanced_nsp=not args.google_nsp,
        document_buffer_size=args.document_buffer_size,
        mask=not args.dynamic_masking,
        seed=args.seed,
        randomness=_randomness(args),
        split_bytes=args.split_bytes,
    )


def _write_locally(args, corpus, builder):
    documents, sentences = corpus.scan()
    if documents == 0:
        raise ValueError(
            f"The input has no text: {len(corpus.paths)} file(s), 0 documents. Check the files and "
            f"--format ({args.format})."
        )
    progress = _Progress(documents * args.dupe_factor, quiet=args.quiet)
    start = time.time()
    writer = builder.write(
        corpus,
        args.output,
        num_shards=args.num_shards,
        shuffle_buffer_size=args.shuffle_buffer_size,
        overwrite=args.overwrite,
        on_document=progress.document,
    )
    progress.done()
    masked = "unmasked (dynamic masking)" if args.dynamic_masking else "statically masked"
    print(
        f"Read {documents} documents, {sentences} sentences from {len(corpus.paths)} file(s). Wrote "
        f"{writer.count} {masked} examples in {time.time() - start:.1f} s to {len(writer.paths)} shard(s) "
        f"in {os.path.abspath(args.output)} ({os.path.basename(writer.metadata_path)} holds the settings)."
    )
    return 0


def _randomness(args):
    if args.runner == LOCAL:
        return args.randomness or "stream"
    if args.randomness == "stream":
        raise UsageError(
            f"--randomness stream draws from one generator in one process; --runner {args.runner} "
            "builds keyed examples (the same on any runner). Leave --randomness out or make it keyed."
        )
    return "keyed"


def _run_pipeline(args, options, corpus, settings):
    from keras_bert_impl.pipelines import PretrainingPipeline

    pipeline = PretrainingPipeline(
        settings, corpus.paths, args.format, args.output, num_shards=args.num_shards, overwrite=args.overwrite
    )
    start = time.time()
    count, paths, metadata_path = pipeline.run(options)
    print(
        f"Wrote {count} examples from {len(corpus.paths)} file(s) with --runner {args.runner} in "
        f"{time.time() - start:.1f} s to {len(paths)} shard(s) in {file_paths.absolute(args.output)} "
        f"({os.path.basename(metadata_path)} holds the settings)."
    )
    return 0


class _Progress:
    """A Keras progress bar over document visits (documents x dupe_factor)."""

    def __init__(self, target, quiet):
        import keras

        self.seen = 0
        self.target = target
        self.bar = None if quiet else keras.utils.Progbar(target, unit_name="document")

    def document(self, new_instances):
        self.seen += 1
        if self.bar is not None and (self.seen % 50 == 0 or self.seen == self.target):
            self.bar.update(min(self.seen, self.target))

    def done(self):
        if self.bar is not None and self.seen < self.target:
            # Documents whose lines held no WordPiece tokens were skipped.
            self.bar.update(self.target, finalize=True)
