"""What `kbert pretrain` and `kbert finetune` share: flags, the starting weights,
precision, the strategy, the optimizer, and the run folder's callbacks."""

import math
import os
import sys

PRECISIONS = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
CHECKPOINT_FORMATS = {"bert_config.json": "google", "encoder_config.json": "model-garden", "config.json": "huggingface"}


class UsageError(ValueError):
    """A flag or input that cannot work; printed as `kbert CMD: message`, exit status 2."""


def add_training_flags(parser, default_learning_rate):
    """Flags every training command takes."""
    parser.add_argument("--batch-size", type=int, default=32, help="Global batch size, split evenly over the replicas. Default 32.")
    parser.add_argument("--seq-len", type=int, default=128, help="Sequence length in wordpieces (padded and truncated to it). Default 128.")
    parser.add_argument("--learning-rate", type=float, default=default_learning_rate, help=f"Peak learning rate of AdamW. Default {default_learning_rate}.")
    parser.add_argument("--warmup-fraction", type=float, default=0.1, help="Share of the steps for linear warm-up, then linear decay to 0. Default 0.1.")
    parser.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay (never on biases or LayerNorm). Default 0.01.")
    parser.add_argument("--seed", type=int, default=0, help="Seed for weights of new layers, dropout and data order. Default 0.")
    parser.add_argument(
        "--strategy", default="auto", choices=["auto", "one-device", "mirrored", "multi-worker", "tpu"],
        help="tf.distribute strategy. auto: multi-worker when TF_CONFIG lists several workers, mirrored over "
        "several GPUs, else one device. multi-worker reads TF_CONFIG; tpu reads --tpu / TPU_NAME.",
    )
    parser.add_argument("--tpu", default=None, help="TPU name or grpc:// address for --strategy tpu.")
    parser.add_argument(
        "--mixed-precision", default="none", choices=sorted(PRECISIONS),
        help="bf16: mixed_bfloat16 (CPUs with AVX512-BF16, TPUs, recent GPUs); fp16: mixed_float16 with dynamic "
        "loss scaling (GPUs). Weights stay float32 either way. Default none.",
    )
    parser.add_argument("--xla", action="store_true", help="Compile the train step with XLA (jit_compile=True).")
    parser.add_argument(
        "--save-every", type=int, default=200,
        help="Back up the full training state (weights, optimizer, data position) every N steps, and at each "
        "epoch end, to OUTPUT/backup. A killed run restarted with the same command resumes there. Default 200.",
    )
    parser.add_argument("--quiet", action="store_true", help="No progress bar: one line per epoch.")


def check_training_flags(args):
    """Errors before anything is built or read."""
    for name in ("batch_size", "seq_len", "save_every"):
        value = getattr(args, name)
        if value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive integer. Received: {value}")
    if not args.learning_rate > 0:
        raise UsageError(f"--learning-rate must be > 0. Received: {args.learning_rate}")
    if not 0 <= args.warmup_fraction < 1:
        raise UsageError(f"--warmup-fraction must be in [0, 1). Received: {args.warmup_fraction}")
    if args.weight_decay < 0:
        raise UsageError(f"--weight-decay must be >= 0. Received: {args.weight_decay}")


def strategy_for(args):
    from keras_bert_impl.training import create_strategy

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
    import keras

    keras.config.set_dtype_policy(PRECISIONS[args.mixed_precision])


def checkpoint_format(path):
    """The importer format of a checkpoint folder, from the config file it holds."""
    for name, fmt in CHECKPOINT_FORMATS.items():
        if os.path.exists(os.path.join(path, name)):
            return fmt
    return None


def resolve_model_path(path, flag="--model"):
    """A .keras file, or a run folder of `kbert pretrain/finetune` (its model.keras)."""
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "model.keras")):
        return os.path.join(path, "model.keras")
    if os.path.isfile(path) and path.endswith(".keras"):
        return path
    raise UsageError(
        f"{flag} must be a .keras file or a run folder of kbert pretrain/finetune (holding model.keras). "
        f"Received: {path!r} ({'a folder without model.keras' if os.path.isdir(path) else 'no such file' if not os.path.exists(path) else 'not a .keras file'})"
    )


def load_init(path):
    """The starting model: a .keras file, a run folder, or a checkpoint folder
    (Google, Hugging Face or Model Garden, told apart by their config file).

    Returns:
        (model, description): the loaded model (backbone or task model) on the host.
    """
    import keras

    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "model.keras")):
        fmt = checkpoint_format(path)
        if fmt is None:
            raise UsageError(
                f"--init {path!r} is a folder with neither model.keras (a kbert run folder) nor a checkpoint config "
                f"({', '.join(CHECKPOINT_FORMATS)}). Pass a .keras file, a kbert run folder or a checkpoint folder."
            )
        from keras_bert_impl.checkpoints import convert_checkpoint

        model, report = convert_checkpoint(path, fmt)
        return model, f"{fmt} checkpoint {path} ({report.summary().splitlines()[0]})"
    model_path = resolve_model_path(path, flag="--init")
    return keras.saving.load_model(model_path), model_path


def backbone_of(model):
    from keras_bert_impl.models import BertBackbone

    backbone = model if isinstance(model, BertBackbone) else getattr(model, "backbone", None)
    if not isinstance(backbone, BertBackbone):
        raise UsageError(f"--init must hold a keras_bert_impl BERT model. Received a {type(model).__name__}.")
    return backbone


def check_vocabulary(backbone, vocab_path):
    """The vocabulary to tokenize with: --vocab if given (it must fit the embedding), else the model's own."""
    if vocab_path:
        from keras_bert_impl.checkpoints.vocabulary import read_vocabulary

        if not os.path.isfile(vocab_path):
            raise UsageError(f"--vocab {vocab_path!r}: no such file.")
        vocabulary = read_vocabulary(vocab_path)
        if len(vocabulary) != backbone.vocabulary_size:
            raise UsageError(
                f"--vocab {vocab_path} has {len(vocabulary)} tokens but the --init model's token embedding has "
                f"vocabulary_size={backbone.vocabulary_size}: the ids would not match the weights. Use the vocab.txt "
                "the model was trained with (or leave out --vocab: a converted or kbert-trained model carries its own)."
            )
        return vocabulary, None
    if backbone.vocabulary is None:
        raise UsageError("The --init model carries no vocabulary: pass --vocab vocab.txt (the one its weights were trained with).")
    return backbone.vocabulary, backbone.lowercase


def rebuilt_backbone(backbone, **overrides):
    """A fresh backbone with `backbone`'s weights and vocabulary, built in the current
    strategy scope and dtype policy (a loaded model keeps the policy it was saved with)."""
    from keras_bert_impl.models import BertBackbone

    config = backbone.get_config()
    config.pop("dtype", None)
    config.pop("name", None)
    config.update(overrides)
    fresh = BertBackbone.from_config(config)
    fresh.set_weights(backbone.get_weights())
    if backbone.vocabulary is not None:
        fresh.set_vocabulary(backbone.vocabulary, backbone.lowercase)
    return fresh


def compile_for_training(model, args, train_steps, loss, metrics=None, weighted_metrics=None):
    from keras_bert_impl.training import create_optimizer

    optimizer = create_optimizer(
        args.learning_rate,
        train_steps=train_steps,
        warmup_steps=int(train_steps * args.warmup_fraction),
        weight_decay=args.weight_decay,
    )
    if args.mixed_precision == "fp16":
        import keras

        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics, weighted_metrics=weighted_metrics, jit_compile=bool(args.xla))


def run_callbacks(output):
    """TensorBoard logs under OUTPUT/logs and an epoch timer (the progress bar is fit's own)."""
    import keras

    from keras_bert_impl.training.epoch_timer import EpochTimer

    return [keras.callbacks.TensorBoard(os.path.join(output, "logs"), update_freq="epoch"), EpochTimer()]


def epoch_seconds(callbacks):
    from keras_bert_impl.training.epoch_timer import EpochTimer

    return [round(s, 3) for c in callbacks if isinstance(c, EpochTimer) for s in c.seconds]


def verbosity(args):
    return 2 if args.quiet or not sys.stderr.isatty() else 1


def atomic_save(model, output, optimizer_state=False):
    """Writes the .keras file next to its destination, then renames it into place,
    so a crash never leaves a half-written model at `output`. Without the
    optimizer's state unless asked (a finished model needs only its weights)."""
    if not optimizer_state and getattr(model, "optimizer", None) is not None and model.optimizer.built:
        from keras_bert_impl.training.best_model_checkpoint import inference_copy

        model = inference_copy(model)
    from keras_bert_impl.atomic_write import write_atomically

    write_atomically(output, model.save, suffix=".keras")


def atomic_json(data, path):
    from keras_bert_impl.atomic_write import write_json_atomically

    write_json_atomically(data, path, indent=2, sort_keys=True)


def is_chief(strategy):
    return getattr(strategy.extended, "should_checkpoint", True)
