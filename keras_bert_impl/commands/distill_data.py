"""`kbert distill`'s data: the --teacher checked, the transfer set (--train rows, --unlabeled
texts) and the validation rows, as the `TrainingData` its spec trains on."""

import dataclasses
import math
import os
import sys

from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.tasks import SEQUENCE_TASKS
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH


def _read(reader, path, flag, method="read_examples", **kwargs):
    hint = (
        f"The student predicts the teacher's labels ({', '.join(reader.labels.labels)}): every label must be "
        "one of them."
    )
    return task_data.read_checked(
        reader, path, flag, "distill", method=method, unknown_label_hint=hint, **kwargs
    )


def _unlabeled_texts(path):
    from keras_bert_impl.commands.text_lines import check_text_file, read_lines

    check_text_file(path, "--unlabeled")
    texts, blank = [], 0
    for line in read_lines(path, "--unlabeled"):
        if line.strip():
            texts.append(line)
        else:
            blank += 1
    if not texts:
        raise UsageError(f"--unlabeled {path!r} holds only blank lines: give one text per line.")
    return texts, blank


def _teacher(args, strategy):
    """The --teacher head, its run's task.json and its task, checked for distillation."""
    import keras_bert_impl as kb
    from keras_bert_impl.commands import model_files

    with strategy.scope():
        teacher, teacher_path = model_files.load_model(args.teacher, "--teacher")
    stored = task_data.read_task_file(os.path.dirname(teacher_path)) or {}
    if isinstance(teacher, kb.QuantizationAwareClassifier):
        # Its fake quantization is there for the integer-only file; a student learns from the
        # float classifier it wraps (what its other export files hold), and is built like it.
        print(
            f"kbert distill: --teacher {teacher_path} is quantization-aware: distilling from the float "
            "classifier it wraps",
            file=sys.stderr,
        )
        teacher = teacher.classifier
    try:
        task = task_data.task_of_model(teacher, has_text_b=stored.get("task") == "pair")
    except ValueError as e:
        raise UsageError(f"--teacher {teacher_path}: {e}") from None
    if task not in SEQUENCE_TASKS:
        raise UsageError(
            f"--teacher {teacher_path} is a {task} model: kbert distill takes classification, pair and "
            "multilabel teachers."
        )
    if getattr(teacher, "activation", None) is not None or teacher.label_names is None:
        raise UsageError(
            f"--teacher {teacher_path} must output logits and carry label names, as kbert finetune's "
            "model.keras does."
        )
    if args.unlabeled and task == "pair":
        raise UsageError(
            "--unlabeled holds single texts, but the teacher classifies pairs: give pairs as --train rows."
        )
    if teacher.backbone.vocabulary is None:
        raise UsageError(f"--teacher {teacher_path} carries no vocabulary: use a kbert finetune run.")
    return teacher, teacher_path, stored, task


@dataclasses.dataclass(frozen=True, kw_only=True)
class _DistillData:
    """What `TrainingData` holds, the teacher, and (task distillation) what the student is scored with."""

    dataset_fn: object
    epochs: int
    steps_per_epoch: int
    validation: object
    teacher: object
    seq_len: int
    teacher_path: str = None
    task: str = None
    layout: dict = None
    eval_reader: object = None

    @property
    def label_names(self):
        return list(self.teacher.label_names)


def _teacher_length(args, stored, teacher_backbone):
    """--seq-len, or the teacher run's own length when it was not given; checked against the model."""
    from keras_bert_impl.commands import model_files

    seq_len = (
        stored.get("seq_len", DEFAULT_SEQUENCE_LENGTH)
        if getattr(args, "seq_len_from_teacher", False)
        else args.seq_len
    )
    model_files.check_sequence_length(seq_len, teacher_backbone)
    return seq_len


def task_data_of(args, run):
    """The --teacher, the transfer set (--train rows, --unlabeled texts) and the validation rows, checked."""
    teacher, teacher_path, stored, task = _teacher(args, run.strategy)
    unlabeled, blank = _unlabeled_texts(args.unlabeled) if args.unlabeled else ([], 0)
    seq_len = _teacher_length(args, stored, teacher.backbone)
    preprocessor, layout, reader, eval_reader = _readers(args, teacher, stored, task, seq_len)
    blank_lines = f" ({blank} blank lines skipped)" if blank else ""
    texts, texts_b, targets = _read(reader, args.train, "--train", build_labels=False)
    validation = _read(eval_reader, args.validation, "--validation", method="read", build_labels=False)
    steps = math.ceil((len(texts) + len(unlabeled)) / args.batch_size)
    print(
        f"kbert distill: {task} teacher {teacher_path}; {len(texts)} labelled + {len(unlabeled)} unlabeled "
        f"examples{blank_lines}, {steps} steps x {args.epochs} epochs on "
        f"{run.strategy.num_replicas_in_sync} replica(s)",
        file=sys.stderr,
    )
    return _DistillData(
        dataset_fn=_transfer_set(args, preprocessor, texts, texts_b, targets, unlabeled),
        epochs=args.epochs,
        steps_per_epoch=steps,
        validation=validation,
        teacher=teacher,
        teacher_path=teacher_path,
        task=task,
        layout=layout,
        eval_reader=eval_reader,
        seq_len=seq_len,
    )


def _transfer_set(args, preprocessor, *rows):
    """The transfer set's batches, every epoch, ordered by (--seed, epoch) alone."""
    from keras_bert_impl.data import transfer_dataset

    buckets = not args.fixed_length
    return lambda: transfer_dataset(preprocessor, *rows, args.batch_size, args.seed, args.epochs, buckets)


def _readers(args, teacher, stored, task, seq_len):
    """The preprocessor at `seq_len`, the layout, and the readers of the transfer set and of --validation."""
    from keras_bert_impl.tokenization import BertPreprocessor

    backbone = teacher.backbone
    preprocessor = BertPreprocessor(
        backbone.vocabulary, lowercase=backbone.lowercase, sequence_length=seq_len
    )
    layout = task_data.data_settings(args, task, stored)
    reader, eval_reader = (
        task_data.make_reader(
            task,
            preprocessor,
            layout,
            labels=list(teacher.label_names),
            batch_size=args.batch_size,
            on_error=args.on_error,
            **extra,
        )
        for extra in ({}, {"length_buckets": not args.fixed_length})
    )
    return preprocessor, layout, reader, eval_reader


def general_data_of(args, run):
    """Task-agnostic distillation's data: --unlabeled text (and --validation's held-out text) for
    the student backbone to learn the teacher encoder's layers on."""
    from keras_bert_impl.commands import model_files
    from keras_bert_impl.data import transfer_dataset
    from keras_bert_impl.tokenization import BertPreprocessor

    unlabeled, blank = _unlabeled_texts(args.unlabeled)
    held_out = _unlabeled_texts(args.validation)[0] if args.validation else None
    with run.strategy.scope():
        teacher, teacher_description = model_files.load_backbone(args.teacher, "--teacher")
    run_dir = args.teacher if os.path.isdir(args.teacher) else os.path.dirname(args.teacher)
    seq_len = _teacher_length(args, task_data.read_task_file(run_dir) or {}, teacher)
    preprocessor = BertPreprocessor(teacher.vocabulary, lowercase=teacher.lowercase, sequence_length=seq_len)
    steps = math.ceil(len(unlabeled) / args.batch_size)
    print(
        f"kbert distill --general: teacher encoder {teacher_description}; {len(unlabeled)} texts"
        f"{f' ({blank} blank lines skipped)' if blank else ''}, {steps} steps x {args.epochs} epochs on "
        f"{run.strategy.num_replicas_in_sync} replica(s)",
        file=sys.stderr,
    )

    def texts(rows, seed, epochs, buckets):
        return transfer_dataset(preprocessor, [], None, None, rows, args.batch_size, seed, epochs, buckets)

    return _DistillData(
        dataset_fn=lambda: texts(unlabeled, args.seed, args.epochs, not args.fixed_length),
        epochs=args.epochs,
        steps_per_epoch=steps,
        # Held-out text: one pass, file order (the loss is a mean, the order does not change it).
        validation=texts(held_out, args.seed, 1, False) if held_out else None,
        teacher=teacher,
        seq_len=seq_len,
    )
