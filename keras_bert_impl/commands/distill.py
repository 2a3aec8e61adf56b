"""`kbert distill`: a smaller student from a fine-tuned teacher run, resumable, under any strategy."""

import functools
import os
import sys

from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.distill_data import general_data_of, task_data_of
from keras_bert_impl.commands.distill_flags import add_distill_parser, check_flags
from keras_bert_impl.commands.distill_models import distill_models
from keras_bert_impl.commands.training_flags import spec_options, train


def add_parser(subparsers):
    parser = add_distill_parser(subparsers)
    parser.set_defaults(func=run)
    return parser


def run(args):
    # A UsageError goes up to cli.main: one line and status 2, or its traceback with --debug.
    from keras_bert_impl.models import best_monitor
    from keras_bert_impl.training import TrainingSpec

    args = check_flags(args)
    inputs = ("teacher", "train", "unlabeled", "validation", "student_init")
    if args.general:
        spec = TrainingSpec(
            **spec_options(args, "distill", inputs, name="kbert distill --general"),
            data=functools.partial(general_data_of, args),
            model=functools.partial(_general_model, args),
            final_metrics=_general_metrics,
        )
    else:
        spec = TrainingSpec(
            **spec_options(args, "distill", inputs),
            data=functools.partial(task_data_of, args),
            model=functools.partial(_task_model, args),
            best=lambda data: best_monitor(data.task),
            final_metrics=functools.partial(_task_metrics, args),
            files=functools.partial(_task_file, args),
        )
    result = train(spec)
    if result is not None:
        (_general_report if args.general else _task_report)(args, result)
    return 0


def _task_model(args, data):
    """The compiled Distiller of the student head (inside the run's scope)."""
    student, distiller, init = distill_models(
        args, data.teacher, data.steps_per_epoch * args.epochs, data.label_names
    )
    print(
        f"kbert distill: student {init}: {student.count_params():,} parameters "
        f"(teacher {data.teacher.count_params():,})",
        file=sys.stderr,
    )
    return distiller


def _task_metrics(args, result):
    from keras_bert_impl.evaluation import compute_metrics

    data, student = result.data, result.model
    scores = {
        key: compute_metrics(data.task, model, data.eval_reader, data.validation, data.label_names)
        for key, model in (("validation", student), ("teacher_validation", data.teacher))
    }
    return {
        **scores,
        "validation_file": os.path.abspath(args.validation),
        "history": result.history,
        "resumed_from_step": result.resumed_from_step,
        "epoch_train_seconds": result.epoch_train_seconds,
        "best": result.best,
        "parameters": {"student": student.count_params(), "teacher": data.teacher.count_params()},
        "seconds": result.seconds,
    }


def _task_file(args, result):
    """task.json: the run's settings, its data layout and labels (evaluate, predict and export read it)."""
    data = result.data
    derived = {
        "task": data.task,
        "teacher": os.path.abspath(data.teacher_path),
        "train": os.path.abspath(args.train),
        "unlabeled": os.path.abspath(args.unlabeled) if args.unlabeled else None,
        "seq_len": data.seq_len,
        "pooling": data.teacher.pooling,
        "steps_per_epoch": data.steps_per_epoch,
        "length_buckets": not args.fixed_length,
        "layer_map": result.trained.mapped_layers,
        "label_names": data.label_names,
    }
    return {task_data.TASK_FILE: {**result.settings, **data.layout, **derived}}


def _task_report(args, result):
    student, metrics = result.model, result.metrics
    key = "accuracy" if result.data.task != "multilabel" else "micro_f1"
    ours, theirs = metrics["validation"], metrics["teacher_validation"]
    if key in ours and key in theirs:
        print(
            f"validation {key}: student {ours[key]:.4f}, teacher {theirs[key]:.4f} "
            f"({100 * ours[key] / max(theirs[key], 1e-12):.1f}% of the teacher)"
        )
    print(
        f"Wrote {args.output}/model.keras ({type(student).__name__}, {student.count_params():,} parameters, "
        f"{len(result.data.label_names)} labels)"
    )


def _general_model(args, data):
    """The compiled Distiller of two encoders (inside the run's scope)."""
    student, distiller, init = distill_models(args, data.teacher, data.steps_per_epoch * args.epochs)
    print(
        f"kbert distill --general: student {init}: {student.count_params():,} parameters (teacher "
        f"{data.teacher.count_params():,}); layer map {distiller.mapped_layers}",
        file=sys.stderr,
    )
    return distiller


def _general_metrics(result):
    student, settings = result.model, result.settings
    student.pooler.trainable = True  # frozen while distilling, trainable again in the saved encoder
    return {
        "history": result.history,
        "resumed_from_step": result.resumed_from_step,
        "epoch_train_seconds": result.epoch_train_seconds,
        "seconds": result.seconds,
        "parameters": {"student": student.count_params(), "teacher": result.data.teacher.count_params()},
        **settings,
        "general": True,
        "layer_map": result.trained.mapped_layers,
        "seq_len": result.data.seq_len,
        "steps_per_epoch": result.data.steps_per_epoch,
        "length_buckets": not settings["fixed_length"],
    }


def _general_report(args, result):
    student = result.model
    print(
        f"last epoch: {', '.join(f'{k} {v[-1]:.4f}' for k, v in sorted(result.metrics['history'].items()))}"
    )
    print(
        f"Wrote {args.output}/model.keras (BertBackbone, {student.num_layers} layers, width "
        f"{student.hidden_dim}, "
        f"{student.count_params():,} parameters): kbert finetune --init {args.output}, or kbert distill "
        f"--student-init {args.output}"
    )
