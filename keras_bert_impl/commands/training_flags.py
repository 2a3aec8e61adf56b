"""The flags every training command takes (`kbert pretrain`, `finetune`, `distill`), their checks,
and the `TrainingSpec` part they make: the one call that trains (keras_bert_impl/training/ does the rest).

Imported while the parser is built, before any command runs: TensorFlow and Keras only inside functions.
"""

import math
import os
import sys

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import positive_int
from keras_bert_impl.commands.precision_flag import add_training_precision_flag
from keras_bert_impl.precisions import DTYPE_POLICIES
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH


def add_flags(parser, table):
    """`parser.add_argument(flag, **options)` for each (flag, options) of `table`: flags as data."""
    for flag, options in table:
        parser.add_argument(flag, **options)


SEQ_LEN_HELP = "Sequence length in wordpieces: longer texts are truncated to it."

# The flags every training command takes, but --learning-rate (its default is the command's)
# and --precision (commands/precision_flag.py), which come between them in --help.
TRAINING_FLAGS = (
    (
        "--batch-size",
        dict(
            type=positive_int,
            default=32,
            help="Global batch size, split evenly over the replicas. Default 32.",
        ),
    ),
    (
        "--seq-len",
        dict(
            type=positive_int,
            default=DEFAULT_SEQUENCE_LENGTH,
            help=f"{SEQ_LEN_HELP} Default {DEFAULT_SEQUENCE_LENGTH}.",
        ),
    ),
    (
        "--warmup-fraction",
        dict(
            type=float,
            default=0.1,
            help="Share of the steps for linear warm-up, then linear decay to 0. Default 0.1.",
        ),
    ),
    (
        "--weight-decay",
        dict(
            type=float, default=0.01, help="AdamW weight decay (never on biases or LayerNorm). Default 0.01."
        ),
    ),
    (
        "--seed",
        dict(type=int, default=0, help="Seed for weights of new layers, dropout and data order. Default 0."),
    ),
    (
        "--strategy",
        dict(
            default="auto",
            choices=["auto", "one-device", "mirrored", "multi-worker", "tpu"],
            help="tf.distribute strategy. auto: multi-worker when TF_CONFIG lists several workers, mirrored "
            "over several GPUs, else one device. multi-worker reads TF_CONFIG; tpu reads --tpu / TPU_NAME.",
        ),
    ),
    ("--tpu", dict(default=None, help="TPU name or grpc:// address for --strategy tpu.")),
)
RUNNING_FLAGS = (
    ("--xla", dict(action="store_true", help="Compile the train step with XLA (jit_compile=True).")),
    (
        "--save-every",
        dict(
            type=positive_int,
            default=200,
            help="Back up the full training state (weights, optimizer, data position) every N steps, and at "
            "each epoch end, to OUTPUT/backup. A killed run restarted with the same command resumes there. "
            "Default 200.",
        ),
    ),
    ("--quiet", dict(action="store_true", help="No progress bar: one line per epoch.")),
)

# The flags of a command that trains a head on task files (`finetune`, `distill`).
HEAD_FLAGS = (
    ("--epochs", dict(type=positive_int, default=3, help="Passes over the training data. Default 3.")),
    ("--dropout", dict(type=float, default=0.1, help="Dropout before the head's output layer. Default 0.1.")),
)


# `kbert finetune`'s LoRA flags (models/lora.py); the layer names are LORA_TARGET_NAMES, spelled
# out here because the parser is built before Keras may be imported.
LORA_TARGET_NAMES = ("query", "key", "value", "attention_output", "intermediate", "output", "dense")
LORA_FLAGS = (
    (
        "--lora-rank",
        dict(
            type=positive_int,
            default=None,
            metavar="R",
            help="Train low-rank adapters of rank R (Keras' Dense.enable_lora) and the head only; every "
            "other encoder weight stays frozen. OUTPUT/metrics.json records the trainable share; `kbert "
            "export` writes every format from the merged weights.",
        ),
    ),
    (
        "--lora-targets",
        dict(
            nargs="+",
            default=None,
            metavar="LAYER",
            help="With --lora-rank: the Dense layers that get adapters, by name "
            f"({', '.join(LORA_TARGET_NAMES)}; the pooler's is dense) or path "
            "(transformer_layer_0/attention/query). Default: query value.",
        ),
    ),
)
# Settings recorded in run.json only when given, so a run without them records what it did before.
SETTINGS_WHEN_GIVEN = ("lora_rank", "lora_targets")


def check_lora_flags(args):
    """--lora-targets needs --lora-rank and names layers; LoRA and --qat do not go together."""
    if args.lora_rank is None:
        if args.lora_targets is not None:
            raise UsageError("--lora-targets chooses the layers of --lora-rank: give --lora-rank R too.")
        return
    if getattr(args, "qat", False):
        raise UsageError(
            f"--lora-rank {args.lora_rank} with --qat: quantization-aware training trains every weight "
            "through fake quantization, LoRA freezes them. Drop one of the two."
        )
    for target in args.lora_targets or ():
        if "/" not in target and target not in LORA_TARGET_NAMES:
            raise UsageError(
                f"--lora-targets {target!r} names no Dense layer of the encoder. Choose among "
                f"{', '.join(LORA_TARGET_NAMES)}, or a path such as transformer_layer_0/attention/query."
            )


def enable_lora(model, args):
    """`--lora-rank`'s adapters on the head's backbone (inside the run's scope, before compiling);
    returns the line that says what trains."""
    if args.lora_rank is None:
        return None
    from keras_bert_impl.models import DEFAULT_LORA_TARGETS

    try:
        model.backbone.enable_lora(args.lora_rank, targets=args.lora_targets or DEFAULT_LORA_TARGETS)
    except ValueError as e:  # a path naming no layer of this encoder
        raise UsageError(f"--lora-targets {str(e).removeprefix('targets: ')}") from None
    share = trainable_share(model)
    return (
        f"LoRA rank {args.lora_rank} on {', '.join(model.backbone.lora_settings['targets'])}: "
        f"{share['trainable_parameters']:,} of {share['parameters']:,} parameters trainable "
        f"({100 * share['trainable_share']:.2f}%)"
    )


def lora_metrics(args, model):
    """metrics.json's "lora" entry of a --lora-rank run: its settings and trainable share."""
    if args.lora_rank is None:
        return {}
    return {"lora": {**model.backbone.lora_settings, **trainable_share(model)}}


def trainable_share(model):
    """{"trainable_parameters", "parameters", "trainable_share"} of `model`."""
    import numpy as np

    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    total = sum(int(np.prod(v.shape)) for v in model.weights)
    return {"trainable_parameters": trainable, "parameters": total, "trainable_share": trainable / total}


def add_training_flags(parser, default_learning_rate, learning_rate_default=None, seq_len_default=None):
    """Flags every training command takes (`learning_rate_default`: the help's words for a
    default the command picks itself, when `default_learning_rate` is None; `seq_len_default`
    likewise for --seq-len, whose default is then None)."""
    batch_size, (seq_len, options) = TRAINING_FLAGS[:2]
    if seq_len_default:
        options = dict(options, default=None, help=f"{SEQ_LEN_HELP} Default {seq_len_default}.")
    add_flags(parser, (batch_size, (seq_len, options)))
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=default_learning_rate,
        help=f"Peak learning rate of AdamW. Default {learning_rate_default or default_learning_rate}.",
    )
    add_flags(parser, TRAINING_FLAGS[2:])
    add_training_precision_flag(parser)
    add_flags(parser, RUNNING_FLAGS)


def add_fixed_length_flag(parser):
    """`kbert finetune` and `distill`: length-bucketed batches unless --fixed-length."""
    parser.add_argument(
        "--fixed-length",
        action="store_true",
        help="classification, pair, multilabel: pad every training batch to --seq-len. By default texts are "
        "batched with others of similar wordpiece length (sorted within shuffled chunks of 64 batches, "
        "batches in random order, the same for a --seed and epoch, so a resumed run is exact) and each "
        "batch is cut to its longest row: the same model, far less work on short texts.",
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
        help="Replace the run in --output when it was made by other settings or inputs (only the files a "
        "kbert run writes are removed; a folder holding other files is always refused).",
    )
    parser.add_argument(
        "--keep-backup",
        action="store_true",
        help="Keep OUTPUT/backup (the full training state, about 3x the model) after the run succeeds.",
    )


# Flags that change how a run reports or how often it saves, not what it computes.
UNRECORDED = ("func", "command", "output", "overwrite", "keep_backup", "quiet", "debug", "save_every")


def spec_options(args, command, inputs, name=None):
    """The `TrainingSpec` arguments every training command takes from its flags: every flag
    but `UNRECORDED` recorded as a setting, except the flags named in `inputs` (dests), which
    are hashed as input files."""
    values = {
        k: v
        for k, v in vars(args).items()
        if k not in UNRECORDED and not (k in SETTINGS_WHEN_GIVEN and v is None)
    }
    return {
        "output": args.output,
        "command": command,
        "settings": {k: v for k, v in values.items() if k not in inputs},
        "inputs": {k: values.get(k) for k in inputs},
        "strategy": lambda: strategy_for(args),
        "dtype_policy": DTYPE_POLICIES[args.precision],
        "seed": args.seed,
        "save_every": args.save_every,
        "verbose": verbosity(args),
        "overwrite": args.overwrite,
        "keep_backup": args.keep_backup,
        "name": name or f"kbert {command}",
    }


def train(spec):
    """`run_training(spec)`: its metrics, or None for a finished run; a folder the run must not
    touch is a UsageError."""
    from keras_bert_impl.training import RunFolderError, run_training

    try:
        return run_training(spec)
    except RunFolderError as e:
        raise UsageError(str(e)) from None


def strategy_for(args):
    from keras_bert_impl.training import create_strategy

    strategy = create_strategy(args.strategy, tpu=args.tpu)
    replicas = strategy.num_replicas_in_sync
    if args.batch_size % replicas:
        raise UsageError(
            f"--batch-size {args.batch_size} does not split over the {replicas} replicas of --strategy "
            f"{args.strategy}: use a multiple of {replicas}, e.g. "
            f"{replicas * max(1, args.batch_size // replicas)} or "
            f"{replicas * math.ceil(args.batch_size / replicas)}."
        )
    devices = strategy.extended.worker_devices
    if getattr(args, "xla", False) and len(devices) > 1 and all("CPU" in d.upper() for d in devices):
        # XLA compiles the step for one device and cannot read the variables the other CPU
        # devices hold ("Trying to access resource ... located in device CPU:1 from device CPU:0").
        raise UsageError(
            f"--xla with --strategy {args.strategy} over {len(devices)} CPU devices: XLA cannot compile a "
            "step "
            "whose replicas are CPU devices of one machine. Drop --xla, or train on one device "
            "(--strategy one-device) with --xla."
        )
    return strategy


def compile_for_training(model, args, train_steps):
    """AdamW with warm-up and decay from the flags; the head's own loss and metrics."""
    from keras_bert_impl.training import AllReplicaLossScaleOptimizer, create_optimizer

    optimizer = create_optimizer(
        args.learning_rate,
        train_steps=train_steps,
        warmup_steps=int(train_steps * args.warmup_fraction),
        weight_decay=args.weight_decay,
    )
    if args.precision == "fp16":
        optimizer = AllReplicaLossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, jit_compile=bool(args.xla))
