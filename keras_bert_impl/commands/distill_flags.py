"""`kbert distill`'s flags and their checks (argparse only: no Keras until the checks run)."""

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import positive_int
from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.training_flags import (
    add_fixed_length_flag,
    add_run_folder_flags,
    add_training_flags,
    check_head_training_flags,
)
from keras_bert_impl.distillation_defaults import DISTILLATION_DEFAULTS as DEFAULTS
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH

# Turc et al. (2019) fine-tune the compact BERTs at 1e-4 .. 3e-4: random layers take the
# upper end. A student of teacher layers is not the teacher: one MiniLM layer under a new
# head reached 0.68 on MR at the teacher's 5e-5 and 0.77 at 2e-4 (bench/experiments/distill_mr.py).
# General distillation regresses hidden states: the random-layer rate serves it too.
LEARNING_RATE = {"preset": 3e-4, "teacher": 2e-4, "init": 2e-4, "general": 3e-4}


def add_distill_parser(subparsers):
    parser = subparsers.add_parser(
        "distill",
        help="Distil a fine-tuned classifier into a smaller student (soft targets, optional labels and unlabeled text).",
        description="Train a student to match the --teacher run's softened outputs: (1 - alpha) * T^2 * "
        "KL(teacher/T || student/T) + alpha * the labels' loss, the teacher frozen inside each step. The "
        "transfer set is the --train rows (labelled) plus the --unlabeled texts (soft targets only). The run "
        "folder is laid out like kbert finetune's: OUTPUT/model.keras (the student with the teacher's "
        "vocabulary and label names: evaluate, predict and export take it), best.keras, metrics.json, "
        "task.json, logs; the training state is backed up to OUTPUT/backup, and the same command resumes a "
        "killed run at the exact step. With --general: task-agnostic distillation (TinyBERT's first stage), "
        "no labels and no head: the student's layers learn to reproduce the teacher's on the --unlabeled text, "
        "and OUTPUT/model.keras is the student backbone, for kbert finetune --init or kbert distill --student-init.",
    )
    parser.add_argument(
        "--teacher",
        required=True,
        help="A kbert finetune run folder (or its model.keras) of a "
        "classification, pair or multilabel model. With --general: any model kbert finetune --init "
        "takes (its encoder is the teacher), e.g. a converted checkpoint folder.",
    )
    parser.add_argument(
        "--general",
        action="store_true",
        help="Task-agnostic distillation of a student backbone on --unlabeled text (no --train, no "
        "labels): --layer-map defaults to uniform and --hidden-weight to 1.",
    )
    student = parser.add_mutually_exclusive_group(required=True)
    student.add_argument(
        "--student-preset",
        metavar="NAME",
        help="A BERT_PRESETS architecture (e.g. bert_tiny, bert_mini), its layers random.",
    )
    student.add_argument(
        "--student-from-teacher",
        metavar="LAYERS",
        help="Comma-separated teacher layer indices, 0-based (DistilBERT: e.g. 0,2,4 of 6): a "
        "student as wide as the teacher, made of those layers and its embeddings.",
    )
    student.add_argument(
        "--student-init",
        metavar="MODEL",
        help="A student encoder with the teacher's vocabulary: a kbert distill --general run folder, "
        "or any model kbert finetune --init takes.",
    )
    parser.add_argument(
        "--student-embeddings",
        choices=["teacher", "random"],
        default=None,
        help="--student-preset: start the embedding tables from the teacher's, projected onto their "
        "principal directions (teacher, default), or random.",
    )
    parser.add_argument(
        "--train",
        help="Labelled training file, laid out like the teacher's (its task.json supplies "
        "the layout; flags override it). Required, except with --general.",
    )
    parser.add_argument(
        "--unlabeled",
        default=None,
        help="Unlabeled in-domain text, one text per line (single-text "
        "tasks): the teacher labels it for the student. Blank lines are skipped and counted. "
        "Required with --general: the whole transfer set.",
    )
    parser.add_argument(
        "--validation",
        help="Labelled validation file, evaluated after each epoch. Required, except "
        "with --general, where it is optional held-out text, one per line (val_ terms per epoch).",
    )
    _add_output_flags(parser)
    _add_loss_flags(parser)
    _add_run_flags(parser)
    return parser


def _add_output_flags(parser):
    parser.add_argument(
        "--output",
        required=True,
        help="Run folder (created). The same command again resumes an unfinished "
        "run and leaves a finished one as it is; other settings or edited inputs are refused.",
    )
    add_run_folder_flags(parser)


def _add_loss_flags(parser):
    parser.add_argument(
        "--temperature",
        type=float,
        default=None,
        help=f"Softening of both distributions, > 0. Default {DEFAULTS.temperature:g}.",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="Weight of the labels' own loss in [0, 1] (labelled rows only); 0 = soft targets only. "
        f"Default {DEFAULTS.labelled_alpha:g}.",
    )
    transfer = parser.add_argument_group(
        "intermediate-layer transfer (TinyBERT; off by default)",
        "Also pull the student's hidden states, attention and embedding output towards the teacher's. The terms "
        "are added to the loss above and logged per epoch (hidden_loss, attention_loss, embedding_loss).",
    )
    transfer.add_argument(
        "--layer-map",
        default=None,
        metavar="uniform|I,J,K",
        help="The teacher layer (1-based hidden state) each student layer learns, one per student "
        "layer, e.g. 2,4 for a 2-layer student of a 4-layer teacher; uniform: TinyBERT's "
        "(i + 1) * teacher_layers // student_layers. Needed by --hidden-weight and --attention-weight.",
    )
    transfer.add_argument(
        "--hidden-weight",
        type=float,
        default=None,
        metavar="W",
        help="Weight of the MSE between the mapped hidden states (the student's through a learned "
        "projection when it is narrower). Default 0 (1 with --general).",
    )
    transfer.add_argument(
        "--attention-weight",
        type=float,
        default=0.0,
        metavar="W",
        help="Weight of the per-head KL between the mapped layers' attention probabilities (the "
        "student needs the teacher's head count). Default 0.",
    )
    transfer.add_argument(
        "--embedding-weight",
        type=float,
        default=0.0,
        metavar="W",
        help="Weight of the MSE between the embedding outputs. Default 0.",
    )


def _add_run_flags(parser):
    parser.add_argument(
        "--epochs", type=positive_int, default=3, help="Passes over the transfer set. Default 3."
    )
    parser.add_argument(
        "--dropout", type=float, default=0.1, help="Dropout of the student's head. Default 0.1."
    )
    add_training_flags(
        parser,
        default_learning_rate=None,
        learning_rate_default="3e-4 for --student-preset and --general, 2e-4 for --student-from-teacher "
        "and --student-init",
    )
    add_fixed_length_flag(parser)
    parser.set_defaults(seq_len=None)
    parser._option_string_actions["--seq-len"].help = (
        "Sequence length in wordpieces. Default: the teacher run's (128 "
        "for a teacher without a run's task.json)."
    )
    task_data.add_data_flags(parser, defaults_from_run=True)


def check_flags(args):
    if args.student_embeddings is not None and not args.student_preset:
        # The other students take the teacher's (or --student-init's) embeddings as they are.
        raise UsageError(
            f"--student-embeddings {args.student_embeddings} shapes a --student-preset's embeddings; "
            "--student-from-teacher and --student-init keep their own. Drop it, or use --student-preset."
        )
    args.student_embeddings = args.student_embeddings or "teacher"
    if args.general:
        _check_general_flags(args)
    else:
        for flag in ("train", "validation"):
            if getattr(args, flag) is None:
                raise UsageError(
                    f"--{flag} is required (labelled rows laid out like the teacher's), except with "
                    "--general (task-agnostic distillation on --unlabeled text)."
                )
        args.temperature = DEFAULTS.temperature if args.temperature is None else args.temperature
        args.alpha = DEFAULTS.labelled_alpha if args.alpha is None else args.alpha
    if args.learning_rate is None:
        kind = (
            "general"
            if args.general
            else "teacher"
            if args.student_from_teacher
            else "init"
            if args.student_init
            else "preset"
        )
        args.learning_rate = LEARNING_RATE[kind]
    if args.seq_len is None:
        args.seq_len = DEFAULT_SEQUENCE_LENGTH  # checked here; the teacher's own length replaces it below
        args.seq_len_from_teacher = True
    check_head_training_flags(args)
    args.layer_map = _layer_map(args.layer_map)
    _check_settings(args)


def _check_settings(args):
    """The Distiller's own check of the settings, before any model is loaded; its refusal
    names the argument, given back as the flag with the library's words."""
    from keras_bert_impl.models.distillation_argument_error import DistillationArgumentError
    from keras_bert_impl.models.distillation_settings import check_distillation_settings

    try:
        settings = check_distillation_settings(
            args.general,
            args.temperature,
            0.0 if args.general else args.alpha,
            args.hidden_weight,
            args.attention_weight,
            args.embedding_weight,
            args.layer_map,
        )
    except DistillationArgumentError as e:
        value = getattr(args, e.argument)
        shown = (
            "(not given)" if value is None else layer_map_text(value) if e.argument == "layer_map" else value
        )
        raise UsageError(f"--{e.argument.replace('_', '-')} {shown}: {e}") from None
    args.hidden_weight, args.layer_map = (
        settings["hidden_weight"],
        settings["layer_map"],
    )  # defaults filled in


def _check_general_flags(args):
    """--general has no labels, no logits and no head: refuse the flags that shape them."""
    if args.unlabeled is None:
        raise UsageError("--general distils on unlabeled text: pass --unlabeled FILE (one text per line).")
    given = [
        flag
        for flag, value in (
            ("--train", args.train),
            ("--temperature", args.temperature),
            ("--alpha", args.alpha),
        )
        if value is not None
    ]
    if given:
        raise UsageError(
            f"--general trains no head and reads no labels or logits, so {' and '.join(given)} "
            f"{'has' if len(given) == 1 else 'have'} no effect: drop {'it' if len(given) == 1 else 'them'}."
        )


def _layer_map(value):
    """--layer-map as the Distiller's layer_map: None, "uniform" or a list of ints >= 1."""
    if value is None or value == "uniform":
        return value
    try:
        layers = [int(part) for part in value.split(",")]
    except ValueError:
        layers = None
    if not layers or min(layers) < 1:
        raise UsageError(
            f"--layer-map takes uniform or comma-separated teacher layers counted from 1 (the first "
            f"layer's output), e.g. 2,4. Received: {value!r}"
        )
    return layers


def layer_map_text(layer_map):
    return layer_map if isinstance(layer_map, str) else ",".join(str(i) for i in layer_map)
