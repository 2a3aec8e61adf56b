"""`kbert distill`'s flags, their checks and the Distiller's terms they ask for (argparse
only: no Keras until the checks run)."""

import argparse

from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import positive_int
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
TRANSFER = "intermediate-layer transfer (TinyBERT; off by default)"
# flag: (its group: None, "student" (one of them is required) or TRANSFER; argparse keywords beside HELP's).
FLAGS = {
    "--teacher": (None, dict(required=True)),
    "--general": (None, dict(action="store_true")),
    "--student-preset": ("student", dict(metavar="NAME")),
    "--student-from-teacher": ("student", dict(metavar="LAYERS")),
    "--student-init": ("student", dict(metavar="MODEL")),
    "--student-embeddings": (None, dict(choices=["teacher", "random"])),
    "--train": (None, {}),
    "--unlabeled": (None, {}),
    "--validation": (None, {}),
    "--output": (None, dict(required=True)),
    "--temperature": (None, dict(type=float)),
    "--alpha": (None, dict(type=float)),
    "--layer-map": (TRANSFER, dict(metavar="uniform|I,J,K")),
    "--hidden-weight": (TRANSFER, dict(type=float, metavar="W")),
    "--attention-weight": (TRANSFER, dict(type=float, default=0.0, metavar="W")),
    "--embedding-weight": (TRANSFER, dict(type=float, default=0.0, metavar="W")),
    "--epochs": (None, dict(type=positive_int, default=3)),
    "--dropout": (None, dict(type=float, default=0.1)),
}
HELP = {
    "distill": "Distil a fine-tuned classifier into a smaller student (soft targets, optional labels and "
    "unlabeled text).",
    "description": "Train a student to match the --teacher run's softened outputs: (1 - alpha) * T^2 * "
    "KL(teacher/T || student/T) + alpha * the labels' loss, the teacher frozen inside each step. The "
    "transfer set is the --train rows (labelled) plus the --unlabeled texts (soft targets only). The run "
    "folder is laid out like kbert finetune's: OUTPUT/model.keras (the student with the teacher's "
    "vocabulary and label names: evaluate, predict and export take it), best.keras, metrics.json, "
    "task.json, logs; the training state is backed up to OUTPUT/backup, and the same command resumes a "
    "killed run at the exact step. With --general: task-agnostic distillation (TinyBERT's first stage), no "
    "labels and no head: the student's layers learn to reproduce the teacher's on the --unlabeled text, and "
    "OUTPUT/model.keras is the student backbone, for kbert finetune --init or kbert distill --student-init.",
    TRANSFER: "Also pull the student's hidden states, attention and embedding output towards the teacher's. "
    "The terms are added to the loss above and logged per epoch (hidden_loss, attention_loss, "
    "embedding_loss).",
    "--teacher": "A kbert finetune run folder (or its model.keras) of a classification, pair or multilabel "
    "model. With --general: any model kbert finetune --init takes (its encoder is the teacher), e.g. a "
    "converted checkpoint folder.",
    "--general": "Task-agnostic distillation of a student backbone on --unlabeled text (no --train, no "
    "labels): --layer-map defaults to uniform and --hidden-weight to 1.",
    "--student-preset": "A BERT_PRESETS architecture (e.g. bert_tiny, bert_mini), its layers random.",
    "--student-from-teacher": "Comma-separated teacher layer indices, 0-based (DistilBERT: e.g. 0,2,4 of "
    "6): a student as wide as the teacher, made of those layers and its embeddings.",
    "--student-init": "A student encoder with the teacher's vocabulary: a kbert distill --general run "
    "folder, or any model kbert finetune --init takes.",
    "--student-embeddings": "--student-preset: start the embedding tables from the teacher's, projected "
    "onto their principal directions (teacher, default), or random.",
    "--train": "Labelled training file, laid out like the teacher's (its task.json supplies the layout; "
    "flags override it). Required, except with --general.",
    "--unlabeled": "Unlabeled in-domain text, one text per line (single-text tasks): the teacher labels it "
    "for the student. Blank lines are skipped and counted. Required with --general: the whole transfer set.",
    "--validation": "Labelled validation file, evaluated after each epoch. Required, except with --general, "
    "where it is optional held-out text, one per line (val_ terms per epoch).",
    "--output": "Run folder (created). The same command again resumes an unfinished run and leaves a "
    "finished one as it is; other settings or edited inputs are refused.",
    "--temperature": f"Softening of both distributions, > 0. Default {DEFAULTS.temperature:g}.",
    "--alpha": "Weight of the labels' own loss in [0, 1] (labelled rows only); 0 = soft targets only. "
    f"Default {DEFAULTS.labelled_alpha:g}.",
    "--layer-map": "The teacher layer (1-based hidden state) each student layer learns, one per student "
    "layer, e.g. 2,4 for a 2-layer student of a 4-layer teacher; uniform: TinyBERT's (i + 1) * "
    "teacher_layers // student_layers. Needed by --hidden-weight and --attention-weight.",
    "--hidden-weight": "Weight of the MSE between the mapped hidden states (the student's through a learned "
    "projection when it is narrower). Default 0 (1 with --general).",
    "--attention-weight": "Weight of the per-head KL between the mapped layers' attention probabilities "
    "(the student needs the teacher's head count). Default 0.",
    "--embedding-weight": "Weight of the MSE between the embedding outputs. Default 0.",
    "--epochs": "Passes over the transfer set. Default 3.",
    "--dropout": "Dropout of the student's head. Default 0.1.",
}


def add_distill_parser(subparsers):
    parser = subparsers.add_parser("distill", help=HELP["distill"], description=HELP["description"])
    groups = {
        None: parser,
        "student": parser.add_mutually_exclusive_group(required=True),
        TRANSFER: parser.add_argument_group(TRANSFER, HELP[TRANSFER]),
    }
    for flag, (group, keywords) in FLAGS.items():
        groups[group].add_argument(flag, help=HELP[flag], **keywords)
    add_run_folder_flags(parser)
    add_training_flags(
        parser,
        default_learning_rate=None,
        learning_rate_default="3e-4 for --student-preset and --general, 2e-4 for --student-from-teacher "
        "and --student-init",
        seq_len_default=f"the teacher run's ({DEFAULT_SEQUENCE_LENGTH} for a teacher without a run's "
        "task.json)",
    )
    add_fixed_length_flag(parser)
    task_data.add_data_flags(parser, defaults_from_run=True)
    return parser


def check_flags(args):
    """The flags checked, as a new namespace with the defaults that depend on other flags
    filled in; the Distiller's terms they ask for are checked too, before any model loads."""
    _check_flag_combinations(args)
    kind = "general" if args.general else "teacher" if args.student_from_teacher else "init"
    defaults = {
        "student_embeddings": "teacher",
        "learning_rate": LEARNING_RATE["preset" if args.student_preset else kind],
        "seq_len": DEFAULT_SEQUENCE_LENGTH,  # checked here; the teacher's own length replaces it
        "hidden_weight": DEFAULTS.general_hidden_weight if args.general else 0.0,
        **({} if args.general else dict(temperature=DEFAULTS.temperature, alpha=DEFAULTS.labelled_alpha)),
    }
    resolved = {**vars(args), "layer_map": _layer_map(args.layer_map)}
    if args.seq_len is None:
        resolved["seq_len_from_teacher"] = True
    resolved = argparse.Namespace(
        **{**resolved, **{k: v for k, v in defaults.items() if resolved[k] is None}}
    )
    check_head_training_flags(resolved)
    mapped = distill_terms(resolved)[int(not args.general) :]
    if args.general and not mapped:
        raise UsageError(
            f"--hidden-weight {resolved.hidden_weight}: General distillation learns from the teacher's "
            "layers only: give hidden_weight, attention_weight or embedding_weight a value > 0. "
            "Received: all 0."
        )
    return _with_layer_map(resolved, [term for term in mapped if hasattr(term, "layer_map")])


def _check_flag_combinations(args):
    if args.student_embeddings is not None and not args.student_preset:
        # The other students take the teacher's (or --student-init's) embeddings as they are.
        raise UsageError(
            f"--student-embeddings {args.student_embeddings} shapes a --student-preset's embeddings; "
            "--student-from-teacher and --student-init keep their own. Drop it, or use --student-preset."
        )
    if args.general and args.unlabeled is None:
        raise UsageError("--general distils on unlabeled text: pass --unlabeled FILE (one text per line).")
    # --general has no labels, no logits and no head: the flags that shape them are refused.
    given = [f"--{name}" for name in ("train", "temperature", "alpha") if getattr(args, name) is not None]
    if args.general and given:
        one = len(given) == 1
        raise UsageError(
            f"--general trains no head and reads no labels or logits, so {' and '.join(given)} "
            f"{'has' if one else 'have'} no effect: drop {'it' if one else 'them'}."
        )
    missing = [f"--{name}" for name in ("train", "validation") if getattr(args, name) is None]
    if missing and not args.general:
        raise UsageError(
            f"{missing[0]} is required (labelled rows laid out like the teacher's), except with "
            "--general (task-agnostic distillation on --unlabeled text)."
        )


def _with_layer_map(args, mapped):
    """`args` with --layer-map checked against the mapped terms (uniform by default with
    --general), one line naming the flag."""
    if args.layer_map is None and mapped and args.general:
        return argparse.Namespace(**{**vars(args), "layer_map": DEFAULTS.general_layer_map})
    if args.layer_map is None and mapped:
        raise UsageError(
            f"--layer-map (not given): hidden_weight={args.hidden_weight} and attention_weight="
            f"{args.attention_weight} compare mapped layers: pass layer_map (a teacher layer per student "
            "layer, or 'uniform')."
        )
    if args.layer_map is not None and not mapped:
        raise UsageError(
            f"--layer-map {layer_map_text(args.layer_map)}: layer_map={args.layer_map!r} maps layers for "
            "hidden_weight and attention_weight, which are both 0: give one of them a weight > 0, or drop "
            "layer_map."
        )
    return args


def distill_terms(args):
    """The Distiller's terms the checked flags ask for: a new list each call (a Distiller
    builds its own terms). A term's refusal is one line naming the flag."""
    from keras_bert_impl.models import (
        AttentionTerm,
        DistillationArgumentError,
        EmbeddingTerm,
        HiddenStatesTerm,
        LogitsTerm,
    )

    layer_map = dict(layer_map=args.layer_map)
    wanted = [
        (not args.general, LogitsTerm, dict(temperature=args.temperature, alpha=args.alpha)),
        (args.hidden_weight, HiddenStatesTerm, dict(weight=args.hidden_weight, **layer_map)),
        (args.attention_weight, AttentionTerm, dict(weight=args.attention_weight, **layer_map)),
        (args.embedding_weight, EmbeddingTerm, dict(weight=args.embedding_weight)),
    ]
    try:
        return [term(**keywords) for on, term, keywords in wanted if on]
    except DistillationArgumentError as e:
        raise UsageError(f"--{e.argument.replace('_', '-')} {getattr(args, e.argument)}: {e}") from None


def _layer_map(value):
    """--layer-map as the terms' layer_map: None, "uniform" or a list of ints >= 1."""
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
