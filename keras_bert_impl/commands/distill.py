"""`kbert distill`: a smaller student from a fine-tuned teacher run, resumable, under any strategy."""

import math
import os
import sys
import time

from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.run_folder import RunFolder, add_run_folder_flags
from keras_bert_impl.commands.training_flags import (
    add_fixed_length_flag,
    add_training_flags,
    check_head_training_flags,
    verbosity,
)
from keras_bert_impl.distillation_defaults import DISTILLATION_DEFAULTS as DEFAULTS

TASKS = ("classification", "pair", "multilabel")
# Turc et al. (2019) fine-tune the compact BERTs at 1e-4 .. 3e-4: random layers take the
# upper end. A student of teacher layers is not the teacher: one MiniLM layer under a new
# head reached 0.68 on MR at the teacher's 5e-5 and 0.77 at 2e-4 (bench/experiments/distill_mr.py).
# General distillation regresses hidden states: the random-layer rate serves it too.
LEARNING_RATE = {"preset": 3e-4, "teacher": 2e-4, "init": 2e-4, "general": 3e-4}


def add_parser(subparsers):
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
    parser.add_argument("--teacher", required=True, help="A kbert finetune run folder (or its model.keras) of a "
                        "classification, pair or multilabel model. With --general: any model kbert finetune --init "
                        "takes (its encoder is the teacher), e.g. a converted checkpoint folder.")
    parser.add_argument("--general", action="store_true",
                        help="Task-agnostic distillation of a student backbone on --unlabeled text (no --train, no "
                        "labels): --layer-map defaults to uniform and --hidden-weight to 1.")
    student = parser.add_mutually_exclusive_group(required=True)
    student.add_argument("--student-preset", metavar="NAME",
                         help="A BERT_PRESETS architecture (e.g. bert_tiny, bert_mini), its layers random.")
    student.add_argument("--student-from-teacher", metavar="LAYERS",
                         help="Comma-separated teacher layer indices, 0-based (DistilBERT: e.g. 0,2,4 of 6): a "
                         "student as wide as the teacher, made of those layers and its embeddings.")
    student.add_argument("--student-init", metavar="MODEL",
                         help="A student encoder with the teacher's vocabulary: a kbert distill --general run folder, "
                         "or any model kbert finetune --init takes.")
    parser.add_argument("--student-embeddings", choices=["teacher", "random"], default="teacher",
                        help="--student-preset: start the embedding tables from the teacher's, projected onto their "
                        "principal directions (teacher, default), or random.")
    parser.add_argument("--train", help="Labelled training file, laid out like the teacher's (its task.json supplies "
                        "the layout; flags override it). Required, except with --general.")
    parser.add_argument("--unlabeled", default=None, help="Unlabeled in-domain text, one text per line (single-text "
                        "tasks): the teacher labels it for the student. Blank lines are skipped and counted. "
                        "Required with --general: the whole transfer set.")
    parser.add_argument("--validation", help="Labelled validation file, evaluated after each epoch. Required, except "
                        "with --general, where it is optional held-out text, one per line (val_ terms per epoch).")
    parser.add_argument("--output", required=True, help="Run folder (created). The same command again resumes an unfinished "
                        "run and leaves a finished one as it is; other settings or edited inputs are refused.")
    add_run_folder_flags(parser)
    parser.add_argument("--temperature", type=float, default=None,
                        help=f"Softening of both distributions, > 0. Default {DEFAULTS.temperature:g}.")
    parser.add_argument("--alpha", type=float, default=None,
                        help="Weight of the labels' own loss in [0, 1] (labelled rows only); 0 = soft targets only. "
                        f"Default {DEFAULTS.labelled_alpha:g}.")
    transfer = parser.add_argument_group(
        "intermediate-layer transfer (TinyBERT; off by default)",
        "Also pull the student's hidden states, attention and embedding output towards the teacher's. The terms "
        "are added to the loss above and logged per epoch (hidden_loss, attention_loss, embedding_loss).")
    transfer.add_argument("--layer-map", default=None, metavar="uniform|I,J,K",
                          help="The teacher layer (1-based hidden state) each student layer learns, one per student "
                          "layer, e.g. 2,4 for a 2-layer student of a 4-layer teacher; uniform: TinyBERT's "
                          "(i + 1) * teacher_layers // student_layers. Needed by --hidden-weight and --attention-weight.")
    transfer.add_argument("--hidden-weight", type=float, default=None, metavar="W",
                          help="Weight of the MSE between the mapped hidden states (the student's through a learned "
                          "projection when it is narrower). Default 0 (1 with --general).")
    transfer.add_argument("--attention-weight", type=float, default=0.0, metavar="W",
                          help="Weight of the per-head KL between the mapped layers' attention probabilities (the "
                          "student needs the teacher's head count). Default 0.")
    transfer.add_argument("--embedding-weight", type=float, default=0.0, metavar="W",
                          help="Weight of the MSE between the embedding outputs. Default 0.")
    parser.add_argument("--epochs", type=int, default=3, help="Passes over the transfer set. Default 3.")
    parser.add_argument("--dropout", type=float, default=0.1, help="Dropout of the student's head. Default 0.1.")
    add_training_flags(parser, default_learning_rate=None,
                       learning_rate_default="3e-4 for --student-preset and --general, 2e-4 for --student-from-teacher "
                       "and --student-init")
    add_fixed_length_flag(parser)
    parser.set_defaults(seq_len=None)
    parser._option_string_actions["--seq-len"].help = ("Sequence length in wordpieces. Default: the teacher run's (128 "
                                                       "for a teacher without a run's task.json).")
    task_data.add_data_flags(parser, defaults_from_run=True)
    parser.set_defaults(func=run)
    return parser


def run(args):
    # A UsageError goes up to cli.main: one line and status 2, or its traceback with --debug.
    return _run(args)


def _layers(value):
    try:
        layers = [int(part) for part in value.split(",")]
    except ValueError:
        raise UsageError(f"--student-from-teacher takes comma-separated layer indices, e.g. 0,2,4. Received: {value!r}") from None
    return layers


def _check_flags(args):
    if args.general:
        _check_general_flags(args)
    else:
        for flag in ("train", "validation"):
            if getattr(args, flag) is None:
                raise UsageError(f"--{flag} is required (labelled rows laid out like the teacher's), except with "
                                 "--general (task-agnostic distillation on --unlabeled text).")
        args.temperature = DEFAULTS.temperature if args.temperature is None else args.temperature
        args.alpha = DEFAULTS.labelled_alpha if args.alpha is None else args.alpha
        args.hidden_weight = 0.0 if args.hidden_weight is None else args.hidden_weight
    if args.learning_rate is None:
        kind = ("general" if args.general else "teacher" if args.student_from_teacher
                else "init" if args.student_init else "preset")
        args.learning_rate = LEARNING_RATE[kind]
    if args.seq_len is None:
        args.seq_len = 128  # checked here; the teacher's own length replaces it below
        args.seq_len_from_teacher = True
    check_head_training_flags(args)
    if not args.general and not args.temperature > 0:
        raise UsageError(f"--temperature must be > 0 (1 = the plain softmax; Hinton et al. use 2 to 20). "
                         f"Received: {args.temperature}")
    if not args.general and not 0 <= args.alpha <= 1:
        raise UsageError(f"--alpha must be in [0, 1] (0: soft targets only, 1: labels only). Received: {args.alpha}")
    for flag in ("hidden_weight", "attention_weight", "embedding_weight"):
        value = getattr(args, flag)
        if not 0 <= value < math.inf:
            raise UsageError(f"--{flag.replace('_', '-')} must be a number >= 0 (0: off). Received: {value}")
    if args.general and not (args.hidden_weight or args.attention_weight or args.embedding_weight):
        raise UsageError("--general learns from the teacher's layers alone: give --hidden-weight, --attention-weight "
                         "or --embedding-weight a value > 0. Received: all 0.")
    if args.general and args.layer_map is None and (args.hidden_weight or args.attention_weight):
        args.layer_map = DEFAULTS.general_layer_map
    args.layer_map = _layer_map(args.layer_map)
    mapped_terms = args.hidden_weight > 0 or args.attention_weight > 0
    if mapped_terms and args.layer_map is None:
        raise UsageError("--hidden-weight and --attention-weight compare mapped layers: pass --layer-map "
                         "(uniform, or one teacher layer per student layer, e.g. 2,4).")
    if args.layer_map is not None and not mapped_terms:
        raise UsageError(f"--layer-map {_layer_map_text(args.layer_map)} does nothing without --hidden-weight or "
                         "--attention-weight > 0.")


def _check_general_flags(args):
    """--general has no labels, no logits and no head: refuse the flags that shape them."""
    if args.unlabeled is None:
        raise UsageError("--general distils on unlabeled text: pass --unlabeled FILE (one text per line).")
    given = [flag for flag, value in (("--train", args.train), ("--temperature", args.temperature),
                                      ("--alpha", args.alpha)) if value is not None]
    if given:
        raise UsageError(f"--general trains no head and reads no labels or logits, so {' and '.join(given)} "
                         f"{'has' if len(given) == 1 else 'have'} no effect: drop {'it' if len(given) == 1 else 'them'}.")
    args.hidden_weight = DEFAULTS.general_hidden_weight if args.hidden_weight is None else args.hidden_weight


def _layer_map(value):
    """--layer-map as the Distiller's layer_map: None, "uniform" or a list of ints >= 1."""
    if value is None or value == "uniform":
        return value
    try:
        layers = [int(part) for part in value.split(",")]
    except ValueError:
        layers = None
    if not layers or min(layers) < 1:
        raise UsageError(f"--layer-map takes uniform or comma-separated teacher layers counted from 1 (the first "
                         f"layer's output), e.g. 2,4. Received: {value!r}")
    return layers


def _layer_map_text(layer_map):
    return layer_map if isinstance(layer_map, str) else ",".join(str(i) for i in layer_map)


def _distiller_error(error, args, student, teacher, teacher_path):
    """A Distiller's DistillationArgumentError as a UsageError naming the flag of the
    argument it names (its depth and head checks); `student`, `teacher`: the backbones."""
    depths = f"a {student.num_layers}-layer student of a {teacher.num_layers}-layer teacher"
    if error.argument == "layer_map":
        return UsageError(f"--layer-map {_layer_map_text(args.layer_map)} for {depths}: {error}")
    if error.argument == "attention_weight":
        return UsageError(f"--attention-weight {args.attention_weight} for {depths}: {error}")
    return UsageError(f"--teacher {teacher_path} and the student: {error}")


def _read(reader, path, flag, method="read_examples", **kwargs):
    hint = (f"The student predicts the teacher's labels ({', '.join(reader.labels.labels)}): every label must be "
            "one of them.")
    return task_data.read_checked(reader, path, flag, "distill", method=method, unknown_label_hint=hint, **kwargs)


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


def _student_backbone(args, teacher_backbone):
    import keras_bert_impl as kb
    from keras_bert_impl.models import backbone_from_layers, embeddings_from_teacher

    if args.student_init:
        from keras_bert_impl.commands.model_files import load_backbone

        backbone, description = load_backbone(args.student_init, "--student-init")
        if list(backbone.vocabulary) != list(teacher_backbone.vocabulary) or backbone.lowercase != teacher_backbone.lowercase:
            raise UsageError(f"--student-init {args.student_init} tokenizes with another vocabulary than the teacher "
                             f"({len(backbone.vocabulary)} vs {len(teacher_backbone.vocabulary)} tokens, lowercase "
                             f"{backbone.lowercase} vs {teacher_backbone.lowercase}): the same ids would mean different "
                             "tokens. Start from a student distilled from this teacher's encoder (kbert distill --general).")
        return backbone, f"{description}"
    if args.student_from_teacher:
        layers = _layers(args.student_from_teacher)
        try:
            return backbone_from_layers(teacher_backbone, layers), f"teacher layers {layers}"
        except ValueError as e:
            raise UsageError(f"--student-from-teacher {args.student_from_teacher}: {e}") from None
    if args.student_preset not in kb.BERT_PRESETS:
        raise UsageError(f"--student-preset {args.student_preset!r} is not a preset. Choose one of: "
                         f"{', '.join(sorted(kb.BERT_PRESETS))}.")
    backbone = kb.BertBackbone.from_preset(
        args.student_preset, vocabulary_size=teacher_backbone.vocabulary_size,
        max_sequence_length=teacher_backbone.max_sequence_length,
    )
    backbone.set_vocabulary(teacher_backbone.vocabulary, teacher_backbone.lowercase)
    if args.student_embeddings == "random":
        return backbone, f"{args.student_preset}, random"
    if backbone.hidden_dim > teacher_backbone.hidden_dim:
        raise UsageError(f"--student-preset {args.student_preset} is wider (hidden_dim {backbone.hidden_dim}) than the "
                         f"teacher ({teacher_backbone.hidden_dim}): its embeddings cannot start from the teacher's; "
                         "pass --student-embeddings random or a narrower preset.")
    kept = embeddings_from_teacher(teacher_backbone, backbone)
    return backbone, f"{args.student_preset}, embeddings from the teacher's by PCA ({100 * kept:.1f}% of the variance)"


def _run(args):
    _check_flags(args)
    folder = RunFolder(args.output, "distill", args,
                       inputs=("teacher", "train", "unlabeled", "validation", "student_init"))
    if folder.check() == "finished":
        folder.report_finished("kbert distill")
        return 0
    if args.general:
        return _run_general(args, folder)
    import keras

    from keras_bert_impl.commands import model_files
    from keras_bert_impl.commands import training_run as tr
    from keras_bert_impl.evaluation import compute_metrics
    from keras_bert_impl.data import transfer_dataset
    from keras_bert_impl.models import DistillationArgumentError, Distiller
    from keras_bert_impl.tokenization import BertPreprocessor
    from keras_bert_impl.training import BackupAndRestore, BackupError, BestModelCheckpoint, fit_resumable

    started = time.monotonic()
    strategy = tr.strategy_for(args)
    with strategy.scope():
        teacher, teacher_path = model_files.load_model(args.teacher, "--teacher")
    stored = task_data.read_task_file(os.path.dirname(teacher_path)) or {}
    try:
        task = task_data.task_of_model(teacher, has_text_b=stored.get("task") == "pair")
    except ValueError as e:
        raise UsageError(f"--teacher {teacher_path}: {e}") from None
    if task not in TASKS:
        raise UsageError(f"--teacher {teacher_path} is a {task} model: kbert distill takes classification, pair and "
                         "multilabel teachers.")
    if getattr(teacher, "activation", None) is not None or teacher.label_names is None:
        raise UsageError(f"--teacher {teacher_path} must output logits and carry label names, as kbert finetune's "
                         "model.keras does.")
    if args.unlabeled and task == "pair":
        raise UsageError("--unlabeled holds single texts, but the teacher classifies pairs: give pairs as --train rows.")
    unlabeled, blank = _unlabeled_texts(args.unlabeled) if args.unlabeled else ([], 0)
    if getattr(args, "seq_len_from_teacher", False):
        args.seq_len = stored.get("seq_len", 128)
    teacher_backbone = teacher.backbone
    if teacher_backbone.vocabulary is None:
        raise UsageError(f"--teacher {teacher_path} carries no vocabulary: use a kbert finetune run.")
    model_files.check_sequence_length(args.seq_len, teacher_backbone)
    preprocessor = BertPreprocessor(teacher_backbone.vocabulary, lowercase=teacher_backbone.lowercase,
                                    sequence_length=args.seq_len)
    settings = task_data.data_settings(args, task, stored)
    label_names = list(teacher.label_names)
    reader = task_data.make_reader(task, preprocessor, settings, labels=label_names, batch_size=args.batch_size,
                                   on_error=args.on_error)
    texts, texts_b, targets = _read(reader, args.train, "--train", build_labels=False)
    length_buckets = task in ("classification", "pair", "multilabel") and not args.fixed_length
    eval_reader = task_data.make_reader(task, preprocessor, settings, labels=label_names, batch_size=args.batch_size,
                                        on_error=args.on_error, length_buckets=length_buckets)
    validation = _read(eval_reader, args.validation, "--validation", method="read", build_labels=False)

    examples = len(texts) + len(unlabeled)
    steps_per_epoch = math.ceil(examples / args.batch_size)
    train_steps = steps_per_epoch * args.epochs
    print(f"kbert distill: {task} teacher {teacher_path}; {len(texts)} labelled + {len(unlabeled)} unlabeled "
          f"examples{f' ({blank} blank lines skipped)' if blank else ''}, {steps_per_epoch} steps x {args.epochs} "
          f"epochs on {strategy.num_replicas_in_sync} replica(s)", file=sys.stderr)

    tr.set_precision(args)
    keras.utils.set_random_seed(args.seed)
    with strategy.scope():
        backbone, init = _student_backbone(args, teacher_backbone)
        if teacher.pooling == "mean":
            backbone.pooler.trainable = False  # the head reads the token vectors only
        student = type(teacher)(backbone, num_classes=teacher.num_classes, label_names=label_names,
                                multi_label=teacher.multi_label, dropout=args.dropout, pooling=teacher.pooling)
        try:
            distiller = Distiller(teacher, student, temperature=args.temperature, alpha=args.alpha,
                                  layer_map=args.layer_map, hidden_weight=args.hidden_weight,
                                  attention_weight=args.attention_weight, embedding_weight=args.embedding_weight)
        except DistillationArgumentError as e:
            raise _distiller_error(e, args, backbone, teacher_backbone, teacher_path) from None
        tr.compile_for_training(distiller, args, train_steps)
    print(f"kbert distill: student {init}: {student.count_params():,} parameters (teacher {teacher.count_params():,})",
          file=sys.stderr)

    run_settings = {
        "task": task, "teacher": os.path.abspath(teacher_path), "train": os.path.abspath(args.train),
        "unlabeled": os.path.abspath(args.unlabeled) if args.unlabeled else None, "student": init,
        "temperature": args.temperature, "alpha": args.alpha, "epochs": args.epochs, "batch_size": args.batch_size,
        "seq_len": args.seq_len, "learning_rate": args.learning_rate, "warmup_fraction": args.warmup_fraction,
        "weight_decay": args.weight_decay, "dropout": args.dropout, "pooling": teacher.pooling, "seed": args.seed,
        "mixed_precision": args.mixed_precision, "steps_per_epoch": steps_per_epoch, "length_buckets": length_buckets,
        "layer_map": distiller.mapped_layers, "hidden_weight": args.hidden_weight,
        "attention_weight": args.attention_weight, "embedding_weight": args.embedding_weight,
    }
    monitor, mode = ("val_loss", "min") if task == "multilabel" else ("val_accuracy", "max")
    chief = tr.is_chief(strategy)
    folder.start(write=chief)  # every check passed: a replaced run's files go, this run is recorded
    backup = BackupAndRestore(os.path.join(args.output, "backup"), save_every=args.save_every,
                              fingerprint={"model": student.get_config(), "run": run_settings})
    best = BestModelCheckpoint(os.path.join(args.output, "best.keras"), monitor=monitor, mode=mode, save=chief)
    callbacks = [best, *tr.run_callbacks(args.output)]

    def dataset_fn():
        return transfer_dataset(preprocessor, texts, texts_b, targets, unlabeled, args.batch_size, args.seed, args.epochs,
                                 length_buckets)

    try:
        with strategy.scope():
            history = fit_resumable(distiller, dataset_fn, epochs=args.epochs, steps_per_epoch=steps_per_epoch,
                                    backup=backup, validation_data=validation, callbacks=callbacks,
                                    verbose=verbosity(args))
    except BackupError as e:
        raise UsageError(str(e)) from None
    if backup.restored_step:
        print(f"kbert distill: resumed from the backup at step {backup.restored_step} of {train_steps}", file=sys.stderr)

    metrics_now = compute_metrics(task, student, eval_reader, validation, label_names)
    teacher_metrics = compute_metrics(task, teacher, eval_reader, validation, label_names)
    best_file = folder.best_file(best.best_epoch, args.epochs - 1)
    if chief:
        tr.atomic_save(student, os.path.join(args.output, "model.keras"))
        tr.atomic_json({**run_settings, **settings, "label_names": label_names}, os.path.join(args.output, task_data.TASK_FILE))
        tr.atomic_json(
            {"validation": metrics_now, "teacher_validation": teacher_metrics,
             "validation_file": os.path.abspath(args.validation),
             "history": {k: [float(v) for v in vals] for k, vals in history.history.items()},
             "resumed_from_step": backup.restored_step, "epoch_train_seconds": tr.epoch_seconds(callbacks),
             "best": {"monitor": monitor, "value": best.best, "epoch": best.best_epoch, "file": best_file},
             "parameters": {"student": student.count_params(), "teacher": teacher.count_params()},
             "seconds": time.monotonic() - started},
            os.path.join(args.output, "metrics.json"),
        )
    folder.finish(best_file, write=chief)
    key = "accuracy" if task != "multilabel" else "micro_f1"
    if key in metrics_now and key in teacher_metrics:
        print(f"validation {key}: student {metrics_now[key]:.4f}, teacher {teacher_metrics[key]:.4f} "
              f"({100 * metrics_now[key] / max(teacher_metrics[key], 1e-12):.1f}% of the teacher)")
    print(f"Wrote {args.output}/model.keras ({type(student).__name__}, {student.count_params():,} parameters, "
          f"{len(label_names)} labels)")
    return 0


def _run_general(args, folder):
    """Task-agnostic distillation: the student backbone learns the teacher encoder's layers
    on --unlabeled text (the Distiller on two backbones); OUTPUT/model.keras is the student backbone."""
    import keras

    from keras_bert_impl.commands import model_files
    from keras_bert_impl.commands import training_run as tr
    from keras_bert_impl.data import transfer_dataset
    from keras_bert_impl.models import DistillationArgumentError, Distiller
    from keras_bert_impl.tokenization import BertPreprocessor
    from keras_bert_impl.training import BackupAndRestore, BackupError, fit_resumable

    started = time.monotonic()
    unlabeled, blank = _unlabeled_texts(args.unlabeled)
    held_out = _unlabeled_texts(args.validation)[0] if args.validation else None
    strategy = tr.strategy_for(args)
    with strategy.scope():
        teacher, teacher_description = model_files.load_backbone(args.teacher, "--teacher")
    if getattr(args, "seq_len_from_teacher", False):
        run_dir = args.teacher if os.path.isdir(args.teacher) else os.path.dirname(args.teacher)
        stored = task_data.read_task_file(run_dir)
        args.seq_len = (stored or {}).get("seq_len", 128)
    model_files.check_sequence_length(args.seq_len, teacher)
    preprocessor = BertPreprocessor(teacher.vocabulary, lowercase=teacher.lowercase, sequence_length=args.seq_len)
    steps_per_epoch = math.ceil(len(unlabeled) / args.batch_size)
    train_steps = steps_per_epoch * args.epochs
    print(f"kbert distill --general: teacher encoder {teacher_description}; {len(unlabeled)} texts"
          f"{f' ({blank} blank lines skipped)' if blank else ''}, {steps_per_epoch} steps x {args.epochs} epochs on "
          f"{strategy.num_replicas_in_sync} replica(s)", file=sys.stderr)

    tr.set_precision(args)
    keras.utils.set_random_seed(args.seed)
    with strategy.scope():
        student, init = _student_backbone(args, teacher)
        # No term reads the pooler: frozen while distilling (no optimizer moments, no Keras
        # warning about missing gradients), trainable again in the saved encoder.
        student.pooler.trainable = False
        try:
            distiller = Distiller(teacher, student, alpha=0.0, layer_map=args.layer_map, hidden_weight=args.hidden_weight,
                                  attention_weight=args.attention_weight, embedding_weight=args.embedding_weight)
        except DistillationArgumentError as e:
            raise _distiller_error(e, args, student, teacher, args.teacher) from None
        tr.compile_for_training(distiller, args, train_steps)
    print(f"kbert distill --general: student {init}: {student.count_params():,} parameters (teacher "
          f"{teacher.count_params():,}); layer map {distiller.mapped_layers}", file=sys.stderr)

    length_buckets = not args.fixed_length
    run_settings = {
        "general": True, "teacher": os.path.abspath(args.teacher), "unlabeled": os.path.abspath(args.unlabeled),
        "validation": os.path.abspath(args.validation) if args.validation else None, "student": init,
        "layer_map": distiller.mapped_layers, "hidden_weight": args.hidden_weight,
        "attention_weight": args.attention_weight, "embedding_weight": args.embedding_weight, "epochs": args.epochs,
        "batch_size": args.batch_size, "seq_len": args.seq_len, "learning_rate": args.learning_rate,
        "warmup_fraction": args.warmup_fraction, "weight_decay": args.weight_decay, "seed": args.seed,
        "mixed_precision": args.mixed_precision, "steps_per_epoch": steps_per_epoch, "length_buckets": length_buckets,
    }
    chief = tr.is_chief(strategy)
    folder.start(write=chief)
    backup = BackupAndRestore(os.path.join(args.output, "backup"), save_every=args.save_every,
                              fingerprint={"model": student.get_config(), "run": run_settings})
    callbacks = tr.run_callbacks(args.output)

    def dataset_fn():
        return transfer_dataset(preprocessor, [], None, None, unlabeled, args.batch_size, args.seed, args.epochs,
                                 length_buckets)

    # Held-out text: one pass, file order (the loss is a mean, the order does not change it).
    validation = (transfer_dataset(preprocessor, [], None, None, held_out, args.batch_size, args.seed, 1,
                                    length_buckets=False) if held_out else None)
    try:
        with strategy.scope():
            history = fit_resumable(distiller, dataset_fn, epochs=args.epochs, steps_per_epoch=steps_per_epoch,
                                    backup=backup, validation_data=validation, callbacks=callbacks,
                                    verbose=verbosity(args))
    except BackupError as e:
        raise UsageError(str(e)) from None
    if backup.restored_step:
        print(f"kbert distill --general: resumed from the backup at step {backup.restored_step} of {train_steps}",
              file=sys.stderr)
    logs = {k: [float(v) for v in vals] for k, vals in history.history.items()}
    student.pooler.trainable = True
    if chief:
        tr.atomic_save(student, os.path.join(args.output, "model.keras"))
        tr.atomic_json(
            {"history": logs, "resumed_from_step": backup.restored_step,
             "epoch_train_seconds": tr.epoch_seconds(callbacks),
             "parameters": {"student": student.count_params(), "teacher": teacher.count_params()},
             "seconds": time.monotonic() - started, **run_settings},
            os.path.join(args.output, "metrics.json"),
        )
    folder.finish(None, write=chief)
    final = ", ".join(f"{k} {v[-1]:.4f}" for k, v in sorted(logs.items()))
    print(f"last epoch: {final}")
    print(f"Wrote {args.output}/model.keras (BertBackbone, {student.num_layers} layers, width {student.hidden_dim}, "
          f"{student.count_params():,} parameters): kbert finetune --init {args.output}, or kbert distill "
          f"--student-init {args.output}")
    return 0
