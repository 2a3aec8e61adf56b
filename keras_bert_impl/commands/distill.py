"""`kbert distill`: the flags as a `distillation_spec` of the library's `TransferSet`,
`student_backbone` and `distillation_terms`, trained by `run_training`."""

import argparse
import functools
import os
import sys

from keras_bert_impl.commands import task_data, text_lines, training_flags as training
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import FlagValueError
from keras_bert_impl.distillation_defaults import DISTILLATION_DEFAULTS as DEFAULTS
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH

DESCRIPTION = (
    "Train a smaller student to match the --teacher run's softened outputs ((1 - alpha) T^2 KL + alpha * the "
    "labels' loss) on --train rows and --unlabeled texts, into a run folder like kbert finetune's. "
    "--general: TinyBERT's task-agnostic stage, a student encoder learning the teacher's layers."
)


def _layer_map(text):
    layers = text if text == "uniform" else [int(part) if part.isdigit() else 0 for part in text.split(",")]
    if layers != "uniform" and min(layers) < 1:
        raise FlagValueError(
            "takes uniform or comma-separated teacher layers counted from 1 (the first layer's output), "
            f"e.g. 2,4. Received: {text!r}"
        )
    return layers


def _layers(text):  # the flag as typed (a recorded setting), once it reads as layer indices
    if not all(part.strip().isdigit() for part in text.split(",")):
        raise FlagValueError(f"takes comma-separated layer indices, e.g. 0,2,4. Received: {text!r}")
    return text


NAME, INPUTS = ("kbert distill", "kbert distill --general"), ("teacher", "train", "unlabeled", "validation")
FLOAT, WEIGHT = dict(type=float), dict(type=float, default=0.0, metavar="W")
EMBEDDINGS, LAYER_MAP = dict(choices=["teacher", "random"]), dict(type=_layer_map, metavar="uniform|I,J,K")
FLAGS = {  # flag: (help, add_argument keywords); the --student- flags exclusive, the last four a group
    "--teacher": ("A kbert finetune run; --general: any model finetune --init takes.", dict(required=True)),
    "--general": ("Task-agnostic distillation on --unlabeled text.", dict(action="store_true")),
    "--student-preset": ("A BERT_PRESETS name (e.g. bert_tiny): its layers random.", dict(metavar="NAME")),
    "--student-from-teacher": ("Teacher layers, 0-based (e.g. 0,2,4), at its width.", dict(type=_layers)),
    "--student-init": ("An encoder with the teacher's vocabulary (a --general run).", dict(metavar="MODEL")),
    "--student-embeddings": ("--student-preset's: teacher (PCA; default) or random.", EMBEDDINGS),
    "--train": ("Labelled rows laid out like the teacher's. Not with --general.", {}),
    "--unlabeled": ("Texts, one per line, for the teacher to label. Required with --general.", {}),
    "--validation": ("Labelled rows (--general: held-out texts), evaluated each epoch.", {}),
    "--output": ("Run folder (created); the same command resumes it.", dict(required=True)),
    "--temperature": (f"Softening of both distributions. Default {DEFAULTS.temperature:g}.", FLOAT),
    "--alpha": (f"Weight of the labels' loss, in [0, 1]. Default {DEFAULTS.labelled_alpha:g}.", FLOAT),
    "--layer-map": ("uniform, or each student layer's teacher layer (from 1), e.g. 2,4.", LAYER_MAP),
    "--hidden-weight": ("Hidden states' MSE. Default 0 (1 with --general).", dict(FLOAT, metavar="W")),
    "--attention-weight": ("Attention's KL (the same head count). Default 0.", WEIGHT),
    "--embedding-weight": ("Embedding outputs' MSE. Default 0.", WEIGHT),
}


def add_parser(subparsers):
    parser = subparsers.add_parser("distill", help="Distil a fine-tuned classifier into a smaller student.")
    parser.description = DESCRIPTION
    students = parser.add_mutually_exclusive_group(required=True)
    transfer = parser.add_argument_group("layer transfer", "TinyBERT's terms, off by default.")
    for flag, (text, keywords) in FLAGS.items():
        group = students if flag in list(FLAGS)[2:5] else transfer if flag in list(FLAGS)[-4:] else parser
        group.add_argument(flag, help=text, **keywords)
    training.add_flags(parser, training.HEAD_FLAGS)
    training.add_run_folder_flags(parser)
    seq_len = f"the teacher run's ({DEFAULT_SEQUENCE_LENGTH} without its task.json)"
    training.add_training_flags(parser, None, "3e-4 (2e-4 for the teacher's layers or an encoder)", seq_len)
    training.add_fixed_length_flag(parser)
    task_data.add_data_flags(parser, defaults_from_run=True)
    parser.set_defaults(func=run)
    return parser


def run(args):
    from keras_bert_impl.training import distillation_spec

    args = _checked(args)
    spec = distillation_spec(
        **training.spec_options(args, "distill", (*INPUTS, "student_init"), name=NAME[args.general]),
        data=functools.partial(_data, args),
        student=functools.partial(_student, args),
        terms=functools.partial(_terms, args),
        compile=lambda distiller, steps: training.compile_for_training(distiller, args, steps),
        dropout=args.dropout,
        facts_file=None if args.general else task_data.TASK_FILE,
        metrics=None if args.general else {"validation_file": os.path.abspath(args.validation)},
    )
    result = _flagged(args, training.train, spec)
    if result is not None:
        _report(args, result)
    return 0


def _checked(args):
    """The flags and the terms they ask for checked; a new namespace, defaults that depend on flags filled."""
    given = [f"--{name}" for name in ("train", "temperature", "alpha") if getattr(args, name) is not None]
    missing = [f"--{name}" for name in ("train", "validation") if getattr(args, name) is None]
    if args.student_embeddings is not None and not args.student_preset:
        raise UsageError(
            f"--student-embeddings {args.student_embeddings} shapes a --student-preset's embeddings; "
            "--student-from-teacher and --student-init keep their own. Drop it, or use --student-preset."
        )
    if args.general and args.unlabeled is None:
        raise UsageError("--general distils on unlabeled text: pass --unlabeled FILE (one text per line).")
    if args.general and given:
        raise UsageError(
            f"--general trains no head and reads no labels or logits, so {' and '.join(given)} "
            f"{'has no effect: drop it' if len(given) == 1 else 'have no effect: drop them'}."
        )
    if missing and not args.general:
        raise UsageError(
            f"{missing[0]} is required (labelled rows laid out like the teacher's), except with "
            "--general (task-agnostic distillation on --unlabeled text)."
        )
    student = "preset" if args.student_preset else "teacher" if args.student_from_teacher else "init"
    defaults = dict(DEFAULTS.for_run(args.general, student), seq_len=DEFAULT_SEQUENCE_LENGTH)
    resolved = {**vars(args), **({"seq_len_from_teacher": True} if args.seq_len is None else {})}
    args = argparse.Namespace(**{**resolved, **{k: v for k, v in defaults.items() if resolved[k] is None}})
    training.check_head_training_flags(args)
    # General distillation's default layer map ("uniform") recorded as the run's setting.
    args.layer_map = next((t.layer_map for t in _terms(args) if hasattr(t, "layer_map")), args.layer_map)
    return args


DESTS = {"layers": "student_from_teacher"}  # else the argument's own dest, "student_" + it, or --teacher


def _flagged(args, call, *arguments):
    """`call(*arguments)`, a `DistillationArgumentError` as one line naming the argument's flag (`DESTS`)."""
    from keras_bert_impl.models import DistillationArgumentError

    try:
        return call(*arguments)
    except DistillationArgumentError as e:
        dests = (DESTS.get(e.argument), e.argument, f"student_{e.argument}")
        dest = next((dest for dest in dests if dest in vars(args)), "teacher")
        value, models = getattr(args, dest), f" for {e.models}" if e.models else ""
        value = ",".join(map(str, value)) if type(value) is list else value
        shown = "(not given)" if value is None else value
        message = str(e).replace("embeddings='random'", "--student-embeddings random")
        raise UsageError(f"--{dest.replace('_', '-')} {shown}{models}: {message}") from None


def _terms(args):
    from keras_bert_impl.models import distillation_terms

    weights = (args.hidden_weight, args.attention_weight, args.embedding_weight, args.layer_map)
    return _flagged(args, distillation_terms, not args.general, args.temperature, args.alpha, *weights)


def _student(args, encoder):
    from keras_bert_impl.commands.model_files import load_backbone  # TensorFlow: not at --help
    from keras_bert_impl.models import student_backbone

    given = args.student_init
    init, described = load_backbone(given, "--student-init") if given else (None, None)
    layers = args.student_from_teacher and [int(part) for part in args.student_from_teacher.split(",")]
    backbone, how = student_backbone(encoder, args.student_preset, layers, init, args.student_embeddings)
    return backbone, described or how


def _data(args, run):
    """The teacher (checked), the transfer set and the validation data, counted on stderr."""
    from keras_bert_impl.commands import model_files
    from keras_bert_impl.data import TransferSet
    from keras_bert_impl.models import QuantizationAwareClassifier, distillation_teacher
    from keras_bert_impl.tokenization import BertPreprocessor

    with run.strategy.scope():
        load = model_files.load_backbone if args.general else model_files.load_model
        teacher, path = load(args.teacher, "--teacher")
    if isinstance(teacher, QuantizationAwareClassifier):
        wraps = "is quantization-aware: distilling from the float classifier it wraps"
        print(f"kbert distill: --teacher {path} {wraps}", file=sys.stderr)
    teacher = teacher if args.general else distillation_teacher(teacher)
    folder = args.teacher if os.path.isdir(args.teacher) else os.path.dirname(args.teacher)
    stored = task_data.read_task_file(folder) or {}
    seq_len = None if getattr(args, "seq_len_from_teacher", False) else args.seq_len
    seq_len = model_files.run_sequence_length(seq_len, stored, getattr(teacher, "backbone", teacher))
    texts = text_lines.non_blank_texts
    unlabeled, blank = texts(args.unlabeled, "--unlabeled") if args.unlabeled else ([], 0)
    preprocessor = BertPreprocessor.from_model(teacher, sequence_length=seq_len)
    common = dict(teacher=teacher, preprocessor=preprocessor, unlabeled=unlabeled, blank_lines=blank)
    common.update(batch_size=args.batch_size, seed=args.seed, epochs=args.epochs)
    common.update(length_buckets=not args.fixed_length)
    if args.general:
        held_out = texts(args.validation, "--validation")[0] if args.validation else ()
        data = TransferSet(**common, held_out=held_out)
    else:
        data = TransferSet(**common, **_rows(args, stored, path, common))
    what = f"{data.task} teacher" if data.task else "teacher encoder"
    replicas = f"on {run.strategy.num_replicas_in_sync} replica(s)"
    print(f"{NAME[args.general]}: {what} {path}; {data.describe()} {replicas}", file=sys.stderr)
    return data


def _rows(args, stored, path, common):
    """A head's --train rows and --validation data, read like the teacher's rows."""
    teacher, preprocessor = common["teacher"], common["preprocessor"]
    task = task_data.task_of_model(teacher, has_text_b=stored.get("task") == "pair")
    if args.unlabeled and task == "pair":
        pairs = "the teacher classifies pairs: give pairs as --train rows"
        raise UsageError(f"--unlabeled holds single texts, but {pairs}.")
    labels, layout = list(teacher.label_names), task_data.data_settings(args, task, stored)
    options = dict(on_error=args.on_error, length_buckets=not args.fixed_length)
    reader = task_data.make_reader(task, preprocessor, layout, labels, batch_size=args.batch_size, **options)
    names = ", ".join(labels)
    hint = f"The student predicts the teacher's labels ({names}): every label must be one of them."
    read = functools.partial(task_data.read_checked, reader, command="distill", unknown_label_hint=hint)
    rows = read(args.train, "--train", method="read_examples", build_labels=False)
    validation = read(args.validation, "--validation", build_labels=False)
    files = dict(teacher=path, train=args.train, unlabeled=args.unlabeled)
    record = {**layout, **{key: value and os.path.abspath(value) for key, value in files.items()}}
    return dict(rows=rows, validation=validation, task=task, reader=reader, record=record)


def _report(args, result):
    student, metrics, out = result.model, result.metrics, args.output
    size = f"{student.count_params():,} parameters"
    if args.general:
        print(f"last epoch: {', '.join(f'{k} {v[-1]:.4f}' for k, v in sorted(metrics['history'].items()))}")
        shape = f"BertBackbone, {student.num_layers} layers, width {student.hidden_dim}, {size}"
        then = f"kbert finetune --init {out}, or kbert distill --student-init {out}"
        return print(f"Wrote {out}/model.keras ({shape}): {then}")
    key = "accuracy" if result.data.task != "multilabel" else "micro_f1"
    ours, theirs = metrics["validation"], metrics["teacher_validation"]
    if key in ours and key in theirs:
        share = f"{100 * ours[key] / max(theirs[key], 1e-12):.1f}% of the teacher"
        print(f"validation {key}: student {ours[key]:.4f}, teacher {theirs[key]:.4f} ({share})")
    print(f"Wrote {out}/model.keras ({type(student).__name__}, {size}, {len(student.label_names)} labels)")
