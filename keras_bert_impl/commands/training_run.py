"""What a training command does around `fit`: the strategy, precision, optimizer, the
run folder's callbacks, and writing its artifacts."""

import math
import os

import keras

from keras_bert_impl.atomic_write import write_atomically, write_json_atomically
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.training_flags import PRECISIONS
from keras_bert_impl.training import EpochTimer, create_optimizer, create_strategy, inference_copy


def strategy_for(args):
    strategy = create_strategy(args.strategy, tpu=args.tpu)
    replicas = strategy.num_replicas_in_sync
    if args.batch_size % replicas:
        raise UsageError(
            f"--batch-size {args.batch_size} does not split over the {replicas} replicas of --strategy "
            f"{args.strategy}: use a multiple of {replicas}, e.g. {replicas * max(1, args.batch_size // replicas)} "
            f"or {replicas * math.ceil(args.batch_size / replicas)}."
        )
    return strategy


def set_precision(args):
    keras.config.set_dtype_policy(PRECISIONS[args.mixed_precision])


def compile_for_training(model, args, train_steps):
    """AdamW with warm-up and decay from the flags; the head's own loss and metrics."""
    optimizer = create_optimizer(
        args.learning_rate,
        train_steps=train_steps,
        warmup_steps=int(train_steps * args.warmup_fraction),
        weight_decay=args.weight_decay,
    )
    if args.mixed_precision == "fp16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, jit_compile=bool(args.xla))


def run_callbacks(output):
    """TensorBoard logs under OUTPUT/logs and an epoch timer (the progress bar is fit's own)."""
    return [keras.callbacks.TensorBoard(os.path.join(output, "logs"), update_freq="epoch"), EpochTimer()]


def epoch_seconds(callbacks):
    return [round(s, 3) for c in callbacks if isinstance(c, EpochTimer) for s in c.seconds]


def atomic_save(model, output, optimizer_state=False):
    """Writes the .keras file next to its destination, then renames it into place,
    so a crash never leaves a half-written model at `output`. Without the
    optimizer's state unless asked (a finished model needs only its weights)."""
    if not optimizer_state and getattr(model, "optimizer", None) is not None and model.optimizer.built:
        model = inference_copy(model)
    write_atomically(output, model.save, suffix=".keras")


def atomic_json(data, path):
    write_json_atomically(data, path, indent=2, sort_keys=True)


def is_chief(strategy):
    return getattr(strategy.extended, "should_checkpoint", True)
