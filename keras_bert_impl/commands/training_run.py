"""The training flags as library calls: the strategy, precision, optimizer and the run's
`TrainingRun` (the driver in keras_bert_impl/training/ does the rest)."""

import math

import keras

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.training_flags import verbosity
from keras_bert_impl.precisions import DTYPE_POLICIES
from keras_bert_impl.training import (
    AllReplicaLossScaleOptimizer,
    RunFolder,
    RunFolderError,
    TrainingRun,
    create_optimizer,
    create_strategy,
)

# Flags that change how a run reports or how often it saves, not what it computes.
UNRECORDED = ("func", "command", "output", "overwrite", "keep_backup", "quiet", "debug", "save_every")


def run_folder(args, command, inputs):
    """The checked `RunFolder` of --output: every flag but `UNRECORDED` recorded, the flags
    named in `inputs` (dests) hashed as input files."""
    values = {k: v for k, v in vars(args).items() if k not in UNRECORDED}
    folder = RunFolder(
        args.output,
        command,
        {k: v for k, v in values.items() if k not in inputs},
        {k: values.get(k) for k in inputs},
        overwrite=args.overwrite,
        keep_backup=args.keep_backup,
    )
    try:
        folder.check()
    except RunFolderError as e:
        raise UsageError(str(e)) from None
    return folder


def training_run(args, folder, strategy, name=None):
    return TrainingRun(
        folder,
        strategy=strategy,
        seed=args.seed,
        save_every=args.save_every,
        verbose=verbosity(args),
        name=name,
    )


def strategy_for(args):
    strategy = create_strategy(args.strategy, tpu=args.tpu)
    replicas = strategy.num_replicas_in_sync
    if args.batch_size % replicas:
        raise UsageError(
            f"--batch-size {args.batch_size} does not split over the {replicas} replicas of --strategy "
            f"{args.strategy}: use a multiple of {replicas}, e.g. {replicas * max(1, args.batch_size // replicas)} "
            f"or {replicas * math.ceil(args.batch_size / replicas)}."
        )
    devices = strategy.extended.worker_devices
    if getattr(args, "xla", False) and len(devices) > 1 and all("CPU" in d.upper() for d in devices):
        # XLA compiles the step for one device and cannot read the variables the other CPU
        # devices hold ("Trying to access resource ... located in device CPU:1 from device CPU:0").
        raise UsageError(
            f"--xla with --strategy {args.strategy} over {len(devices)} CPU devices: XLA cannot compile a step "
            "whose replicas are CPU devices of one machine. Drop --xla, or train on one device "
            "(--strategy one-device) with --xla."
        )
    return strategy


def set_precision(args):
    keras.config.set_dtype_policy(DTYPE_POLICIES[args.precision])


def compile_for_training(model, args, train_steps):
    """AdamW with warm-up and decay from the flags; the head's own loss and metrics."""
    optimizer = create_optimizer(
        args.learning_rate,
        train_steps=train_steps,
        warmup_steps=int(train_steps * args.warmup_fraction),
        weight_decay=args.weight_decay,
    )
    if args.precision == "fp16":
        optimizer = AllReplicaLossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, jit_compile=bool(args.xla))
