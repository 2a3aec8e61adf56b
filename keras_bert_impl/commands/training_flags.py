"""The flags every training command takes (`kbert pretrain`, `kbert finetune`), and their checks.

argparse only: imported while the parser is built, before any command runs.
"""

import math
import os
import sys

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import positive_int
from keras_bert_impl.commands.precision_flag import add_training_precision_flag
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH


def add_training_flags(parser, default_learning_rate, learning_rate_default=None, seq_len_default=None):
    """Flags every training command takes (`learning_rate_default`: the help's words for a
    default the command picks itself, when `default_learning_rate` is None; `seq_len_default`
    likewise for --seq-len, whose default is then None)."""
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=32,
        help="Global batch size, split evenly over the replicas. Default 32.",
    )
    parser.add_argument(
        "--seq-len",
        type=positive_int,
        default=None if seq_len_default else DEFAULT_SEQUENCE_LENGTH,
        help="Sequence length in wordpieces: longer texts are truncated to it. "
        f"Default {seq_len_default or DEFAULT_SEQUENCE_LENGTH}.",
    )
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=default_learning_rate,
        help=f"Peak learning rate of AdamW. Default {learning_rate_default or default_learning_rate}.",
    )
    parser.add_argument(
        "--warmup-fraction",
        type=float,
        default=0.1,
        help="Share of the steps for linear warm-up, then linear decay to 0. Default 0.1.",
    )
    parser.add_argument(
        "--weight-decay",
        type=float,
        default=0.01,
        help="AdamW weight decay (never on biases or LayerNorm). Default 0.01.",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="Seed for weights of new layers, dropout and data order. Default 0.",
    )
    parser.add_argument(
        "--strategy",
        default="auto",
        choices=["auto", "one-device", "mirrored", "multi-worker", "tpu"],
        help="tf.distribute strategy. auto: multi-worker when TF_CONFIG lists several workers, mirrored over "
        "several GPUs, else one device. multi-worker reads TF_CONFIG; tpu reads --tpu / TPU_NAME.",
    )
    parser.add_argument("--tpu", default=None, help="TPU name or grpc:// address for --strategy tpu.")
    add_training_precision_flag(parser)
    parser.add_argument(
        "--xla", action="store_true", help="Compile the train step with XLA (jit_compile=True)."
    )
    parser.add_argument(
        "--save-every",
        type=positive_int,
        default=200,
        help="Back up the full training state (weights, optimizer, data position) every N steps, and at each "
        "epoch end, to OUTPUT/backup. A killed run restarted with the same command resumes there. Default 200.",
    )
    parser.add_argument("--quiet", action="store_true", help="No progress bar: one line per epoch.")


def add_fixed_length_flag(parser):
    """`kbert finetune` and `distill`: length-bucketed batches unless --fixed-length."""
    parser.add_argument(
        "--fixed-length",
        action="store_true",
        help="classification, pair, multilabel: pad every training batch to --seq-len. By default texts are batched "
        "with others of similar wordpiece length (sorted within shuffled chunks of 64 batches, batches in random "
        "order, the same for a --seed and epoch, so a resumed run is exact) and each batch is cut to its longest "
        "row: the same model, far less work on short texts.",
    )


def check_training_flags(args):
    """Errors before anything is built or read."""
    # NaN and inf fail these comparisons too: a run with either trained to an all-NaN model and exited 0.
    if not 0 < args.learning_rate < math.inf:
        raise UsageError(f"--learning-rate must be a finite number > 0. Received: {args.learning_rate}")
    if not 0 <= args.warmup_fraction < 1:
        raise UsageError(f"--warmup-fraction must be in [0, 1). Received: {args.warmup_fraction}")
    if not 0 <= args.weight_decay < math.inf:
        raise UsageError(f"--weight-decay must be a finite number >= 0. Received: {args.weight_decay}")
    # numpy's and Keras' seeding take 0..2**32-1; outside it a run failed later, naming another flag or none.
    if not 0 <= args.seed < 2**32:
        raise UsageError(f"--seed must be in 0..{2**32 - 1}. Received: {args.seed}")


def check_head_training_flags(args):
    """The checks of a command that trains a head on task files (`finetune`, `distill`):
    the training flags, --epochs, --dropout, and non-empty --train and --validation files."""
    check_training_flags(args)
    if not 0 <= args.dropout < 1:
        raise UsageError(f"--dropout must be in [0, 1). Received: {args.dropout}")
    for flag, path in (("--train", args.train), ("--validation", args.validation)):
        if path is None:  # finetune --validation-split
            continue
        if not os.path.isfile(path):
            raise UsageError(f"{flag} {path!r}: no such file.")
        if os.path.getsize(path) == 0:
            raise UsageError(f"{flag} {path} is empty: it needs at least one example.")


def verbosity(args):
    """fit's verbose: a progress bar on a terminal, one line per epoch otherwise or with --quiet."""
    return 2 if args.quiet or not sys.stderr.isatty() else 1


def add_run_folder_flags(parser):
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="Replace the run in --output when it was made by other settings or inputs (only the files a kbert "
        "run writes are removed; a folder holding other files is always refused).",
    )
    parser.add_argument(
        "--keep-backup",
        action="store_true",
        help="Keep OUTPUT/backup (the full training state, about 3x the model) after the run succeeds.",
    )
