"""`kbert distill`: a smaller student from a fine-tuned teacher run, resumable, under any strategy."""

import math
import os
import sys
import types

from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.distill_flags import add_distill_parser, check_flags
from keras_bert_impl.commands.distill_models import distill_models
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH


def add_parser(subparsers):
    parser = add_distill_parser(subparsers)
    parser.set_defaults(func=run)
    return parser


def run(args):
    # A UsageError goes up to cli.main: one line and status 2, or its traceback with --debug.
    args = check_flags(args)
    from keras_bert_impl.commands import training_run as tr

    folder = tr.run_folder(
        args, "distill", inputs=("teacher", "train", "unlabeled", "validation", "student_init")
    )
    if folder.state == "finished":
        folder.report_finished("kbert distill")
        return 0
    return _run_general(args, folder, tr) if args.general else _run_task(args, folder, tr)


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
            f"kbert distill: --teacher {teacher_path} is quantization-aware: distilling from the float classifier "
            "it wraps",
            file=sys.stderr,
        )
        teacher = teacher.classifier
    try:
        task = task_data.task_of_model(teacher, has_text_b=stored.get("task") == "pair")
    except ValueError as e:
        raise UsageError(f"--teacher {teacher_path}: {e}") from None
    if task not in task_data.SEQUENCE_TASKS:
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


def _task_data(args, teacher, stored, task):
    """The transfer set (--train rows and --unlabeled texts) and the validation rows, all checked."""
    from keras_bert_impl.commands import model_files
    from keras_bert_impl.data import transfer_dataset
    from keras_bert_impl.tokenization import BertPreprocessor

    data = types.SimpleNamespace(label_names=list(teacher.label_names))
    unlabeled, data.blank = _unlabeled_texts(args.unlabeled) if args.unlabeled else ([], 0)
    if getattr(args, "seq_len_from_teacher", False):
        args.seq_len = stored.get("seq_len", DEFAULT_SEQUENCE_LENGTH)
    model_files.check_sequence_length(args.seq_len, teacher.backbone)
    preprocessor = BertPreprocessor(
        teacher.backbone.vocabulary, lowercase=teacher.backbone.lowercase, sequence_length=args.seq_len
    )
    data.settings = task_data.data_settings(args, task, stored)
    reader = task_data.make_reader(
        task,
        preprocessor,
        data.settings,
        labels=data.label_names,
        batch_size=args.batch_size,
        on_error=args.on_error,
    )
    texts, texts_b, targets = _read(reader, args.train, "--train", build_labels=False)
    data.length_buckets = length_buckets = not args.fixed_length
    data.eval_reader = task_data.make_reader(
        task,
        preprocessor,
        data.settings,
        labels=data.label_names,
        batch_size=args.batch_size,
        on_error=args.on_error,
        length_buckets=length_buckets,
    )
    data.validation = _read(
        data.eval_reader, args.validation, "--validation", method="read", build_labels=False
    )
    data.labelled, data.unlabeled = len(texts), len(unlabeled)
    data.steps_per_epoch = math.ceil((len(texts) + len(unlabeled)) / args.batch_size)
    data.dataset_fn = lambda: transfer_dataset(
        preprocessor,
        texts,
        texts_b,
        targets,
        unlabeled,
        args.batch_size,
        args.seed,
        args.epochs,
        length_buckets,
    )
    return data


def _run_task(args, folder, tr):
    run = tr.training_run(args, folder, tr.strategy_for(args))
    teacher, teacher_path, stored, task = _teacher(args, run.strategy)
    data = _task_data(args, teacher, stored, task)
    train_steps = data.steps_per_epoch * args.epochs
    print(
        f"kbert distill: {task} teacher {teacher_path}; {data.labelled} labelled + {data.unlabeled} unlabeled "
        f"examples{f' ({data.blank} blank lines skipped)' if data.blank else ''}, {data.steps_per_epoch} steps x "
        f"{args.epochs} epochs on {run.strategy.num_replicas_in_sync} replica(s)",
        file=sys.stderr,
    )
    tr.set_precision(args)
    student, distiller, init = run.build(lambda: distill_models(args, teacher, train_steps, data.label_names))
    print(
        f"kbert distill: student {init}: {student.count_params():,} parameters (teacher {teacher.count_params():,})",
        file=sys.stderr,
    )
    run_settings = {
        "task": task,
        "teacher": os.path.abspath(teacher_path),
        "train": os.path.abspath(args.train),
        "unlabeled": os.path.abspath(args.unlabeled) if args.unlabeled else None,
        "student": init,
        "temperature": args.temperature,
        "alpha": args.alpha,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "learning_rate": args.learning_rate,
        "warmup_fraction": args.warmup_fraction,
        "weight_decay": args.weight_decay,
        "dropout": args.dropout,
        "pooling": teacher.pooling,
        "seed": args.seed,
        "precision": args.precision,
        "steps_per_epoch": data.steps_per_epoch,
        "length_buckets": data.length_buckets,
        "layer_map": distiller.mapped_layers,
        "hidden_weight": args.hidden_weight,
        "attention_weight": args.attention_weight,
        "embedding_weight": args.embedding_weight,
    }

    def final_metrics(result):
        from keras_bert_impl.evaluation import compute_metrics

        data.metrics = compute_metrics(task, student, data.eval_reader, data.validation, data.label_names)
        data.teacher_metrics = compute_metrics(
            task, teacher, data.eval_reader, data.validation, data.label_names
        )
        return {
            "validation": data.metrics,
            "teacher_validation": data.teacher_metrics,
            "validation_file": os.path.abspath(args.validation),
            "history": result.history,
            "resumed_from_step": result.resumed_from_step,
            "epoch_train_seconds": result.epoch_train_seconds,
            "best": result.best,
            "parameters": {"student": student.count_params(), "teacher": teacher.count_params()},
            "seconds": result.seconds,
        }

    best = ("val_loss", "min") if task == "multilabel" else ("val_accuracy", "max")
    task_file = {**run_settings, **data.settings, "label_names": data.label_names}
    run.train(
        distiller,
        data.dataset_fn,
        args.epochs,
        data.steps_per_epoch,
        final_metrics,
        saved=student,
        validation_data=data.validation,
        settings=run_settings,
        best=best,
        files={task_data.TASK_FILE: task_file},
    )
    key = "accuracy" if task != "multilabel" else "micro_f1"
    if key in data.metrics and key in data.teacher_metrics:
        print(
            f"validation {key}: student {data.metrics[key]:.4f}, teacher {data.teacher_metrics[key]:.4f} "
            f"({100 * data.metrics[key] / max(data.teacher_metrics[key], 1e-12):.1f}% of the teacher)"
        )
    print(
        f"Wrote {args.output}/model.keras ({type(student).__name__}, {student.count_params():,} parameters, "
        f"{len(data.label_names)} labels)"
    )
    return 0


def _run_general(args, folder, tr):
    """Task-agnostic distillation: the student backbone learns the teacher encoder's layers
    on --unlabeled text (the Distiller on two backbones); OUTPUT/model.keras is the student backbone."""
    from keras_bert_impl.commands import model_files
    from keras_bert_impl.data import transfer_dataset
    from keras_bert_impl.tokenization import BertPreprocessor

    unlabeled, blank = _unlabeled_texts(args.unlabeled)
    held_out = _unlabeled_texts(args.validation)[0] if args.validation else None
    run = tr.training_run(args, folder, tr.strategy_for(args), name="kbert distill --general")
    with run.strategy.scope():
        teacher, teacher_description = model_files.load_backbone(args.teacher, "--teacher")
    if getattr(args, "seq_len_from_teacher", False):
        run_dir = args.teacher if os.path.isdir(args.teacher) else os.path.dirname(args.teacher)
        args.seq_len = (task_data.read_task_file(run_dir) or {}).get("seq_len", DEFAULT_SEQUENCE_LENGTH)
    model_files.check_sequence_length(args.seq_len, teacher)
    preprocessor = BertPreprocessor(
        teacher.vocabulary, lowercase=teacher.lowercase, sequence_length=args.seq_len
    )
    steps_per_epoch = math.ceil(len(unlabeled) / args.batch_size)
    print(
        f"kbert distill --general: teacher encoder {teacher_description}; {len(unlabeled)} texts"
        f"{f' ({blank} blank lines skipped)' if blank else ''}, {steps_per_epoch} steps x {args.epochs} epochs on "
        f"{run.strategy.num_replicas_in_sync} replica(s)",
        file=sys.stderr,
    )
    tr.set_precision(args)
    student, distiller, init = run.build(lambda: distill_models(args, teacher, steps_per_epoch * args.epochs))
    print(
        f"kbert distill --general: student {init}: {student.count_params():,} parameters (teacher "
        f"{teacher.count_params():,}); layer map {distiller.mapped_layers}",
        file=sys.stderr,
    )
    run_settings = {
        "general": True,
        "teacher": os.path.abspath(args.teacher),
        "unlabeled": os.path.abspath(args.unlabeled),
        "validation": os.path.abspath(args.validation) if args.validation else None,
        "student": init,
        "layer_map": distiller.mapped_layers,
        "hidden_weight": args.hidden_weight,
        "attention_weight": args.attention_weight,
        "embedding_weight": args.embedding_weight,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "learning_rate": args.learning_rate,
        "warmup_fraction": args.warmup_fraction,
        "weight_decay": args.weight_decay,
        "seed": args.seed,
        "precision": args.precision,
        "steps_per_epoch": steps_per_epoch,
        "length_buckets": not args.fixed_length,
    }

    def final_metrics(result):
        student.pooler.trainable = True  # frozen while distilling, trainable again in the saved encoder
        return {
            "history": result.history,
            "resumed_from_step": result.resumed_from_step,
            "epoch_train_seconds": result.epoch_train_seconds,
            "seconds": result.seconds,
            "parameters": {"student": student.count_params(), "teacher": teacher.count_params()},
            **run_settings,
        }

    # Held-out text: one pass, file order (the loss is a mean, the order does not change it).
    validation = (
        transfer_dataset(
            preprocessor, [], None, None, held_out, args.batch_size, args.seed, 1, length_buckets=False
        )
        if held_out
        else None
    )
    metrics = run.train(
        distiller,
        lambda: transfer_dataset(
            preprocessor,
            [],
            None,
            None,
            unlabeled,
            args.batch_size,
            args.seed,
            args.epochs,
            not args.fixed_length,
        ),
        args.epochs,
        steps_per_epoch,
        final_metrics,
        saved=student,
        validation_data=validation,
        settings=run_settings,
    )
    print(f"last epoch: {', '.join(f'{k} {v[-1]:.4f}' for k, v in sorted(metrics['history'].items()))}")
    print(
        f"Wrote {args.output}/model.keras (BertBackbone, {student.num_layers} layers, width {student.hidden_dim}, "
        f"{student.count_params():,} parameters): kbert finetune --init {args.output}, or kbert distill "
        f"--student-init {args.output}"
    )
    return 0
