"""`kbert finetune`: fine-tune a BERT model on a task file, resumable, under any strategy."""

import dataclasses
import functools
import math
import os
import sys
import tempfile

import numpy as np

from keras_bert_impl.commands import task_data
from keras_bert_impl.atomic_write import write_text_atomically
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command, add_flags, positive_int
from keras_bert_impl.commands.label_checks import check_training_labels, report_labels
from keras_bert_impl.commands.training_flags import (
    LORA_FLAGS,
    add_fixed_length_flag,
    add_run_folder_flags,
    add_training_flags,
    check_head_training_flags,
    check_lora_flags,
    compile_for_training,
    enable_lora,
    lora_metrics,
    spec_options,
    train,
)


_HELP = "Fine-tune a BERT model on a classification, pair, multi-label, tagging or SQuAD file."
DESCRIPTION = (
    "Read the training and validation files (every row checked before training starts), put the task's head "
    "on the --init model, train with AdamW (warm-up, linear decay) under a tf.distribute strategy, and write "
    "OUTPUT/model.keras (the head, the backbone, its vocabulary and casing, and the label names: `kbert "
    "predict` and the export need nothing else), OUTPUT/best.keras (best validation epoch), "
    "OUTPUT/metrics.json, OUTPUT/task.json and TensorBoard logs in OUTPUT/logs. The full training state is "
    "backed up to OUTPUT/backup every --save-every steps: if the run is killed, the same command resumes at "
    "the exact step."
)
# The command's own flags (the training, run folder and data layout flags are shared).
FLAGS = (
    ("--task", dict(required=True, choices=task_data.TASKS, help="The head to train.")),
    ("--train", dict(required=True, help="Training file.")),
    ("--validation", dict(default=None, help="Validation file, same layout; evaluated after each epoch.")),
    (
        "--validation-split",
        dict(
            type=float,
            default=None,
            metavar="FRACTION",
            help="Instead of --validation (classification, pair, multilabel): hold out this fraction of "
            "--train, stratified by label and drawn by --seed; both parts are kept in OUTPUT/split/ as "
            "JSONL.",
        ),
    ),
    (
        "--init",
        dict(
            required=True,
            help="Starting weights: a .keras model (backbone, pretrainer or any head), a kbert run folder, "
            "or a checkpoint folder (Google bert_config.json, Hugging Face config.json + safetensors, Model "
            "Garden encoder_config.json).",
        ),
    ),
    (
        "--output",
        dict(
            required=True,
            help="Run folder (created). The same command again resumes an unfinished run and leaves a "
            "finished one as it is; other settings or edited input files are refused (see --overwrite).",
        ),
    ),
    (
        "--vocab",
        dict(
            default=None,
            help="vocab.txt to tokenize with, when --init carries none (it must match the embedding size).",
        ),
    ),
    ("--epochs", dict(type=positive_int, default=3, help="Passes over the training file. Default 3.")),
    ("--dropout", dict(type=float, default=0.1, help="Dropout before the head's output layer. Default 0.1.")),
    (
        "--pooling",
        dict(
            choices=["pooled", "mean"],
            default="pooled",
            help="classification/pair/multilabel: classify BERT's pooled [CLS] output (default), or the "
            "mean of the token vectors, the pooling sentence-transformers checkpoints (e.g. "
            "all-MiniLM-L6-v2) were trained with.",
        ),
    ),
    (
        "--allow-label-variants",
        dict(
            action="store_true",
            help="Train even when labels look like spellings of one label (1 and 1.0, Pos and pos): each is "
            "a class.",
        ),
    ),
    (
        "--qat",
        dict(
            action="store_true",
            help="Quantization-aware training for the integer-only file (classification, pair, multilabel; "
            "fp32): train through int8 fake quantization where `kbert export --quantizations int8_only` "
            "quantizes. From an --init classifier of the same labels (a finished finetune run) its head is "
            "kept: fit a little more at a small --learning-rate. OUTPUT/model.keras is then a "
            "QuantizationAwareClassifier; its int8_only file takes the ranges it learned (no --calibration).",
        ),
    ),
)


def add_parser(subparsers):
    parser = add_command(subparsers, "finetune", run, _HELP, DESCRIPTION, FLAGS)
    add_flags(parser, LORA_FLAGS)
    add_run_folder_flags(parser)
    add_training_flags(parser, default_learning_rate=5e-5)
    add_fixed_length_flag(parser)
    task_data.add_data_flags(parser)
    return parser


def _read(reader, path, what, method="read", **kwargs):
    hint = (
        "Every validation label must occur in the training file (the head has one output per training label)."
        if what == "--validation"
        else None
    )
    return task_data.read_checked(
        reader, path, what, "finetune", method=method, unknown_label_hint=hint, **kwargs
    )


def run(args):
    # A UsageError goes up to cli.main: one line and status 2, or its traceback with --debug.
    _check_validation_flags(args)
    _check_qat_flags(args)
    check_lora_flags(args)
    check_head_training_flags(args)
    from keras_bert_impl.models import best_monitor
    from keras_bert_impl.training import TrainingSpec

    with tempfile.TemporaryDirectory(prefix="kbert-finetune-") as scratch:
        result = train(
            TrainingSpec(
                **spec_options(args, "finetune", inputs=("train", "validation", "init", "vocab")),
                data=functools.partial(_data, args, scratch),
                model=functools.partial(_model, args),
                best=best_monitor(args.task),
                final_metrics=functools.partial(_final_metrics, args),
                files=functools.partial(_task_file, args),
            )
        )
    if result is not None:
        shown = ", ".join(
            f"{k} {v:.4f}" for k, v in result.metrics["validation"].items() if isinstance(v, float)
        )
        print(f"validation: {shown}")
        names = result.data.label_names
        print(
            f"Wrote {args.output}/model.keras ({type(result.model).__name__}, "
            f"{len(result.data.vocabulary)}-token "
            f"vocabulary{f', {len(names)} labels' if names else ''})"
        )
    return 0


def _check_validation_flags(args):
    if (args.validation is None) == (args.validation_split is None):
        raise UsageError(
            "Give either --validation FILE or --validation-split FRACTION (exactly one of them)."
        )
    if args.validation_split is None:
        return
    if not 0 < args.validation_split < 1:
        raise UsageError(
            f"--validation-split must be a fraction in (0, 1), e.g. 0.1. Received: {args.validation_split}"
        )
    if args.task not in task_data.SEQUENCE_TASKS:
        raise UsageError(
            f"--validation-split splits row files (classification, pair, multilabel): give --task "
            f"{args.task} a --validation file."
        )


def _check_qat_flags(args):
    if not args.qat:
        return
    if args.task not in task_data.SEQUENCE_TASKS:
        raise UsageError(
            f"--qat trains a classifier for the integer-only file, which is built for classifiers only: "
            f"--task {args.task} cannot be exported integer-only. Drop --qat (export it in float32 or "
            "dynamic_int8)."
        )
    if args.precision != "fp32":
        raise UsageError(
            f"--qat trains in fp32 (its fake quantization computes in float32). Received: --precision "
            f"{args.precision}. Drop --precision (fp32 is the default) or drop --qat."
        )


def _qat_start(args, init, label_names):
    """The classifier --qat continues (None: a new head), checked against the training file."""
    import keras_bert_impl as kb

    if isinstance(init, kb.QuantizationAwareClassifier):
        init = init.classifier
    if not args.qat or not isinstance(init, kb.BertClassifier):
        return None
    if list(init.label_names or []) != list(label_names) or init.multi_label != (args.task == "multilabel"):
        raise UsageError(
            f"--qat continues --init's classifier on its own task, but it was trained on labels "
            f"{init.label_names}{' (multi-label)' if init.multi_label else ''} and --train {args.train} has "
            f"{label_names}{' (multi-label)' if args.task == 'multilabel' else ''}. Give the training file "
            "of "
            "that task, or --init its backbone for a new head."
        )
    return init


def _split(args, preprocessor, settings, scratch):
    """The training file's rows split into scratch/train.jsonl and scratch/validation.jsonl."""
    from keras_bert_impl.commands.validation_split import split_rows

    reader = task_data.make_reader(args.task, preprocessor, settings, on_error=args.on_error)
    texts, texts_b, targets = _read(reader, args.train, "--train", method="read_examples")
    names = reader.labels.labels
    if args.task == "multilabel":
        labels = [[names[i] for i in np.flatnonzero(target)] for target in targets]
    else:
        labels = [names[int(target)] for target in targets]
    train, validation, layout, (n_train, n_validation) = split_rows(
        texts, texts_b, labels, args.validation_split, args.seed, settings, scratch
    )
    if n_train == 0 or n_validation == 0:
        raise UsageError(
            f"--validation-split {args.validation_split} of {len(texts)} rows leaves "
            f"{n_train} to train on and {n_validation} to validate: use more rows or another fraction."
        )
    print(
        f"kbert finetune: --validation-split {args.validation_split}: {n_train} rows to train on, "
        f"{n_validation} "
        f"held out (stratified by label, --seed {args.seed})",
        file=sys.stderr,
    )
    return train, validation, layout


def _start(args):
    """--init's model, its encoder, vocabulary and the preprocessor at --seq-len."""
    from keras_bert_impl.commands import model_files
    from keras_bert_impl.tokenization import BertPreprocessor

    init, source = model_files.load_init(args.init)
    backbone = model_files.backbone_of(init)
    vocabulary, lowercase = model_files.vocabulary_for(backbone, args.vocab)
    model_files.check_sequence_length(args.seq_len, backbone)
    preprocessor = BertPreprocessor(vocabulary, lowercase=lowercase, sequence_length=args.seq_len)
    return init, source, backbone, vocabulary, preprocessor


def _readers(args, preprocessor, scratch, length_buckets):
    """The training reader and where both files are (a --validation-split's parts in scratch)."""
    layout = task_data.data_settings(args, args.task)
    paths = args.train, args.validation
    try:
        if args.validation_split is not None:
            *paths, layout = _split(args, preprocessor, layout, scratch)
        reader = task_data.make_reader(
            args.task,
            preprocessor,
            layout,
            batch_size=args.batch_size,
            shuffle=True,
            seed=args.seed,
            on_error=args.on_error,
            length_buckets=length_buckets,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    return reader, layout, paths


def _data(args, scratch, run):
    """The model to start from and both files, every row parsed and checked before any training step."""
    init, source, backbone, vocabulary, preprocessor = _start(args)
    length_buckets = args.task in task_data.SEQUENCE_TASKS and not args.fixed_length
    reader, layout, (train_path, validation_path) = _readers(args, preprocessor, scratch, length_buckets)
    # All epochs in one dataset, epoch e ordered by (--seed, e) alone: a resumed run
    # trains on exactly the batches of an uninterrupted one, across epoch boundaries too.
    first_read = _read(reader, train_path, "--train", epochs=args.epochs)
    report = reader.report
    examples = report.examples if args.task != "squad" else report.counters["windows"]
    check_training_labels(
        args.task, args.train, report.label_counts, allow_variants=args.allow_label_variants
    )
    labels = getattr(reader, "labels", None)
    eval_reader, validation = _validation(args, preprocessor, layout, labels, length_buckets, validation_path)
    report_labels(args.task, report.label_counts, validation_path, eval_reader.report.label_counts)
    label_names = list(labels.labels) if labels is not None else None
    qat_start = _qat_start(args, init, label_names)
    steps = math.ceil(examples / args.batch_size)
    print(
        f"kbert finetune: {args.task} from {source}; {examples} training examples, {steps} steps x "
        f"{args.epochs} epochs on {run.strategy.num_replicas_in_sync} replica(s)",
        file=sys.stderr,
    )
    if args.validation_split is not None and run.chief:
        train_path, validation_path = _keep_split(run, scratch)
    return _FinetuneData(
        dataset_fn=_dataset_fn(args, reader, train_path, first_read),
        epochs=args.epochs,
        steps_per_epoch=steps,
        validation=validation,
        length_buckets=length_buckets,
        backbone=backbone,
        vocabulary=vocabulary,
        eval_reader=eval_reader,
        label_names=label_names,
        layout=layout,
        validation_path=validation_path,
        qat_start=qat_start,
    )


def _validation(args, preprocessor, layout, labels, length_buckets, path):
    """The validation reader (the training file's labels) and its rows, read and checked."""
    eval_reader = task_data.make_reader(
        args.task,
        preprocessor,
        layout,
        labels=labels,
        batch_size=args.batch_size,
        on_error=args.on_error,
        length_buckets=length_buckets,
    )
    squad = args.task == "squad"
    return eval_reader, _read(eval_reader, path, "--validation", **({} if squad else {"build_labels": False}))


def _dataset_fn(args, reader, train_path, first_read):
    """The training batches: the first fit call takes the (never iterated) dataset of the checking
    read; a second one, after a mid-epoch resume, needs a fresh dataset object (see fit_resumable)."""
    unused = [first_read]
    return lambda: unused.pop() if unused else _read(reader, train_path, "--train", epochs=args.epochs)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _FinetuneData:
    """What `TrainingData` holds, and what the model builder and the final metrics read besides."""

    dataset_fn: object
    epochs: int
    steps_per_epoch: int
    validation: object
    length_buckets: bool
    backbone: object
    vocabulary: list
    eval_reader: object
    label_names: list
    layout: dict
    validation_path: str
    qat_start: object


def _model(args, data):
    """The head on a fresh copy of the --init encoder, compiled (inside the run's scope); with
    --qat, wrapped for quantization-aware training, --init's head kept when it has one."""
    import keras_bert_impl as kb
    from keras_bert_impl.commands import model_files
    from keras_bert_impl.models import build_head

    names, start = data.label_names, data.qat_start
    model = build_head(
        args.task,
        model_files.rebuilt_backbone(data.backbone),
        len(names) if names else None,
        names,
        args.dropout,
        args.pooling if start is None else start.pooling,
    )
    if start is not None:
        model.output_dense.set_weights(start.output_dense.get_weights())
    if args.qat:
        model = kb.QuantizationAwareClassifier(model)
    lora = enable_lora(model, args)
    if lora:
        print(f"kbert finetune: {lora}", file=sys.stderr)
    compile_for_training(model, args, data.steps_per_epoch * args.epochs)
    return model


def _final_metrics(args, result):
    from keras_bert_impl.evaluation import compute_metrics

    data = result.data
    return {
        "validation": compute_metrics(
            args.task, result.model, data.eval_reader, data.validation, data.label_names
        ),
        "validation_file": os.path.abspath(data.validation_path),
        "history": result.history,
        "resumed_from_step": result.resumed_from_step,
        "epoch_train_seconds": result.epoch_train_seconds,
        "best": result.best,
        "seconds": result.seconds,
        **lora_metrics(args, result.model),
    }


def _task_file(args, result):
    """task.json: the run's settings, its data layout and labels (evaluate, predict and export read it)."""
    data = result.data
    derived = {
        "train": os.path.abspath(args.train),
        "steps_per_epoch": data.steps_per_epoch,
        "length_buckets": data.length_buckets,
        "label_names": data.label_names,
    }
    return {task_data.TASK_FILE: {**result.settings, **data.layout, **derived}}


def _keep_split(run, scratch):
    """The run keeps its held-out rows (kbert evaluate --data OUTPUT/split/validation.jsonl)."""
    from keras_bert_impl.commands.validation_split import SPLIT_FOLDER

    kept = []
    for name in ("train.jsonl", "validation.jsonl"):
        with open(os.path.join(scratch, name), encoding="utf-8") as f:
            kept.append(run.output_path(SPLIT_FOLDER, name))
            write_text_atomically(f.read(), kept[-1])
    return kept
