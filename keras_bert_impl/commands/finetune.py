"""`kbert finetune`: fine-tune a BERT model on a task file, resumable, under any strategy."""

import math
import os
import sys
import tempfile
import types

import numpy as np

from keras_bert_impl.commands import task_data
from keras_bert_impl.atomic_write import write_text_atomically
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import positive_int
from keras_bert_impl.commands.label_checks import check_training_labels, report_labels
from keras_bert_impl.commands.training_flags import (
    add_fixed_length_flag,
    add_run_folder_flags,
    add_training_flags,
    check_head_training_flags,
)


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "finetune",
        help="Fine-tune a BERT model on a classification, pair, multi-label, tagging or SQuAD file.",
        description="Read the training and validation files (every row checked before training starts), put "
        "the task's head on the --init model, train with AdamW (warm-up, linear decay) under a tf.distribute "
        "strategy, and write OUTPUT/model.keras (the head, the backbone, its vocabulary and casing, and the "
        "label names: `kbert predict` and the export need nothing else), OUTPUT/best.keras (best validation "
        "epoch), OUTPUT/metrics.json, OUTPUT/task.json and TensorBoard logs in OUTPUT/logs. The full training "
        "state is backed up to OUTPUT/backup every --save-every steps: if the run is killed, the same command "
        "resumes at the exact step.",
    )
    parser.add_argument("--task", required=True, choices=task_data.TASKS, help="The head to train.")
    parser.add_argument("--train", required=True, help="Training file.")
    parser.add_argument(
        "--validation", default=None, help="Validation file, same layout; evaluated after each epoch."
    )
    parser.add_argument(
        "--validation-split",
        type=float,
        default=None,
        metavar="FRACTION",
        help="Instead of --validation (classification, pair, multilabel): hold out this fraction of --train, "
        "stratified by label and drawn by --seed; both parts are kept in OUTPUT/split/ as JSONL.",
    )
    parser.add_argument(
        "--init",
        required=True,
        help="Starting weights: a .keras model (backbone, pretrainer or any head), a kbert run folder, or a "
        "checkpoint folder (Google bert_config.json, Hugging Face config.json + safetensors, Model Garden "
        "encoder_config.json).",
    )
    parser.add_argument(
        "--output",
        required=True,
        help="Run folder (created). The same command again resumes an unfinished run and leaves a finished one as "
        "it is; other settings or edited input files are refused (see --overwrite).",
    )
    add_run_folder_flags(parser)
    parser.add_argument(
        "--vocab",
        default=None,
        help="vocab.txt to tokenize with, when --init carries none (it must match the embedding size).",
    )
    parser.add_argument(
        "--epochs", type=positive_int, default=3, help="Passes over the training file. Default 3."
    )
    parser.add_argument(
        "--dropout", type=float, default=0.1, help="Dropout before the head's output layer. Default 0.1."
    )
    parser.add_argument(
        "--pooling",
        choices=["pooled", "mean"],
        default="pooled",
        help="classification/pair/multilabel: classify BERT's pooled [CLS] output (default), or the mean of the "
        "token vectors, the pooling sentence-transformers checkpoints (e.g. all-MiniLM-L6-v2) were trained with.",
    )
    parser.add_argument(
        "--allow-label-variants",
        action="store_true",
        help="Train even when labels look like spellings of one label (1 and 1.0, Pos and pos): each is a class.",
    )
    parser.add_argument(
        "--qat",
        action="store_true",
        help="Quantization-aware training for the integer-only file (classification, pair, multilabel; fp32): "
        "train through int8 fake quantization where `kbert export --quantizations int8_only` quantizes. From "
        "an --init classifier of the same labels (a finished finetune run) its head is kept: fit a little more "
        "at a small --learning-rate. OUTPUT/model.keras is then a QuantizationAwareClassifier; its int8_only "
        "file takes the ranges it learned (no --calibration).",
    )
    add_training_flags(parser, default_learning_rate=5e-5)
    add_fixed_length_flag(parser)
    task_data.add_data_flags(parser)
    parser.set_defaults(func=run)
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
    with tempfile.TemporaryDirectory(prefix="kbert-finetune-") as scratch:
        return _run(args, scratch)


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
            f"{label_names}{' (multi-label)' if args.task == 'multilabel' else ''}. Give the training file of "
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
        f"kbert finetune: --validation-split {args.validation_split}: {n_train} rows to train on, {n_validation} "
        f"held out (stratified by label, --seed {args.seed})",
        file=sys.stderr,
    )
    return train, validation, layout


def _run(args, scratch):
    _check_validation_flags(args)
    _check_qat_flags(args)
    check_head_training_flags(args)
    from keras_bert_impl.commands import training_run as tr

    folder = tr.run_folder(args, "finetune", inputs=("train", "validation", "init", "vocab"))
    if folder.state == "finished":
        folder.report_finished("kbert finetune")
        return 0
    run = tr.training_run(args, folder, tr.strategy_for(args))
    data = _data(args, scratch, run.strategy)
    tr.set_precision(args)
    model, monitor, mode = run.build(lambda: _model(args, data, tr))
    run_settings = {
        "task": args.task,
        "train": os.path.abspath(args.train),
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "learning_rate": args.learning_rate,
        "warmup_fraction": args.warmup_fraction,
        "weight_decay": args.weight_decay,
        "dropout": args.dropout,
        "pooling": args.pooling,
        "seed": args.seed,
        "precision": args.precision,
        "steps_per_epoch": data.steps_per_epoch,
        "length_buckets": data.length_buckets,
    }
    run.start()  # every check passed: a replaced run's files go, this run is recorded
    if args.validation_split is not None and run.chief:
        _keep_split(args, data, scratch)
    first_read = [data.first_read]

    def dataset_fn():
        # The first fit call takes the (never iterated) dataset of the checking read above;
        # a second one, after a mid-epoch resume, needs a fresh dataset object (see fit_resumable).
        return (
            first_read.pop()
            if first_read
            else _read(data.reader, data.train_path, "--train", epochs=args.epochs)
        )

    def final_metrics(result):
        from keras_bert_impl.evaluation import compute_metrics

        data.metrics = compute_metrics(args.task, model, data.eval_reader, data.validation, data.label_names)
        return {
            "validation": data.metrics,
            "validation_file": os.path.abspath(data.validation_path),
            "history": result.history,
            "resumed_from_step": result.resumed_from_step,
            "epoch_train_seconds": result.epoch_train_seconds,
            "best": result.best,
            "seconds": result.seconds,
        }

    task_file = {**run_settings, **data.settings, "label_names": data.label_names}
    run.train(
        model,
        dataset_fn,
        args.epochs,
        data.steps_per_epoch,
        final_metrics,
        validation_data=data.validation,
        settings=run_settings,
        best=(monitor, mode),
        files={task_data.TASK_FILE: task_file},
    )
    shown = ", ".join(f"{k} {v:.4f}" for k, v in data.metrics.items() if isinstance(v, float))
    print(f"validation: {shown}")
    print(
        f"Wrote {args.output}/model.keras ({type(model).__name__}, {len(data.vocabulary)}-token vocabulary"
        f"{f', {len(data.label_names)} labels' if data.label_names else ''})"
    )
    return 0


def _data(args, scratch, strategy):
    """The model to start from and both files, every row parsed and checked before any training step."""
    from keras_bert_impl.commands import model_files
    from keras_bert_impl.tokenization import BertPreprocessor

    data = types.SimpleNamespace()
    init, source = model_files.load_init(args.init)
    data.backbone = model_files.backbone_of(init)
    data.vocabulary, lowercase = model_files.vocabulary_for(data.backbone, args.vocab)
    model_files.check_sequence_length(args.seq_len, data.backbone)
    preprocessor = BertPreprocessor(data.vocabulary, lowercase=lowercase, sequence_length=args.seq_len)
    data.settings = settings = task_data.data_settings(args, args.task)
    data.train_path, data.validation_path, layout = args.train, args.validation, settings
    data.length_buckets = args.task in task_data.SEQUENCE_TASKS and not args.fixed_length
    try:
        if args.validation_split is not None:
            data.train_path, data.validation_path, layout = _split(args, preprocessor, settings, scratch)
        data.reader = task_data.make_reader(
            args.task,
            preprocessor,
            layout,
            batch_size=args.batch_size,
            shuffle=True,
            seed=args.seed,
            on_error=args.on_error,
            length_buckets=data.length_buckets,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    # All epochs in one dataset, epoch e ordered by (--seed, e) alone: a resumed run
    # trains on exactly the batches of an uninterrupted one, across epoch boundaries too.
    data.first_read = _read(data.reader, data.train_path, "--train", epochs=args.epochs)
    train_report = data.reader.report
    train_examples = train_report.examples if args.task != "squad" else train_report.counters["windows"]
    check_training_labels(
        args.task, args.train, train_report.label_counts, allow_variants=args.allow_label_variants
    )
    labels = getattr(data.reader, "labels", None)
    data.label_names = list(labels.labels) if labels is not None else None
    data.eval_reader = task_data.make_reader(
        args.task,
        preprocessor,
        layout,
        labels=labels,
        batch_size=args.batch_size,
        on_error=args.on_error,
        length_buckets=data.length_buckets,
    )
    data.validation = _read(
        data.eval_reader,
        data.validation_path,
        "--validation",
        **({} if args.task == "squad" else {"build_labels": False}),
    )
    report_labels(
        args.task, train_report.label_counts, data.validation_path, data.eval_reader.report.label_counts
    )
    data.qat_start = _qat_start(args, init, data.label_names)
    data.steps_per_epoch = math.ceil(train_examples / args.batch_size)
    print(
        f"kbert finetune: {args.task} from {source}; {train_examples} training examples, {data.steps_per_epoch} "
        f"steps x {args.epochs} epochs on {strategy.num_replicas_in_sync} replica(s)",
        file=sys.stderr,
    )
    return data


def _model(args, data, tr):
    """The head on a fresh copy of the --init encoder, compiled (inside the run's scope); with
    --qat, wrapped for quantization-aware training, --init's head kept when it has one."""
    import keras_bert_impl as kb
    from keras_bert_impl.commands import model_files

    fresh = model_files.rebuilt_backbone(data.backbone)
    names = data.label_names
    start = data.qat_start
    model, monitor, mode = task_data.build_head(
        args.task,
        fresh,
        len(names) if names else None,
        names,
        args.dropout,
        args.pooling if start is None else start.pooling,
    )
    if start is not None:
        model.output_dense.set_weights(start.output_dense.get_weights())
    if args.qat:
        model = kb.QuantizationAwareClassifier(model)
    tr.compile_for_training(model, args, data.steps_per_epoch * args.epochs)
    return model, monitor, mode


def _keep_split(args, data, scratch):
    """The run keeps its held-out rows (kbert evaluate --data OUTPUT/split/validation.jsonl)."""
    from keras_bert_impl.commands.validation_split import SPLIT_FOLDER

    kept = os.path.join(args.output, SPLIT_FOLDER)
    for name in ("train.jsonl", "validation.jsonl"):
        with open(os.path.join(scratch, name), encoding="utf-8") as f:
            write_text_atomically(f.read(), os.path.join(kept, name))
    data.train_path, data.validation_path = (
        os.path.join(kept, "train.jsonl"),
        os.path.join(kept, "validation.jsonl"),
    )
