"""`kbert predict`: a fine-tuned model's predictions on strings or a file."""

import json
import os

from keras_bert_impl.commands import beam_inference
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command, add_flags, positive_int
from keras_bert_impl.commands.inference_setup import load_for_inference
from keras_bert_impl.commands.precision_flag import add_precision_flag
from keras_bert_impl.commands.lite_route import LiteRoute
from keras_bert_impl.commands.predict_export import (
    export_classifier,
    export_rows,
    is_export_folder,
    route_classifier,
)
from keras_bert_impl.commands.predict_rows import READER_TASKS, RowPredictor, check_text, file_row, plain_line
from keras_bert_impl.commands.progress import Progress
from keras_bert_impl.commands.runner_flags import LOCAL, add_runner_flags, check_runner_flags
from keras_bert_impl.commands.text_lines import read_lines
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH


_HELP = "Predict with a fine-tuned model on strings or a text file."
_DESCRIPTION = (
    "Classify texts (label and probability), tag words, or answer questions with a model "
    "from `kbert finetune`; the model carries its vocabulary, casing and label names. Texts come as "
    "arguments or from --file (one text per line; for pair tasks and squad a JSON object per line with "
    "text and text_b, or question and context). One output line per input line: a blank input line gives "
    "an empty result (empty fields; null label and probability in --json)."
)
# (flag, add_argument keywords) after --model and TEXT, in `--help`'s order.
_FLAG_TABLE = (
    ("--file", dict(help="A UTF-8 file with one text (or JSON object) per line; - reads stdin.")),
    (
        "--text-b",
        dict(
            action="append", help="pair: the second text of each TEXT argument, in order (repeat the flag)."
        ),
    ),
    ("--question", dict(action="append", help="squad: a question (repeat; pairs with --context).")),
    ("--context", dict(action="append", help="squad: the paragraph for each --question.")),
    (
        "--threshold",
        dict(type=float, default=0.5, help="multilabel: probability to predict a label. Default 0.5."),
    ),
    ("--batch-size", dict(type=positive_int, default=32, help="Default 32.")),
    (
        "--seq-len",
        dict(type=int, help=f"Default: the run's training --seq-len, else {DEFAULT_SEQUENCE_LENGTH}."),
    ),
)


def add_parser(subparsers):
    parser = add_command(subparsers, "predict", run, _HELP, _DESCRIPTION)
    parser.add_argument(
        "--model",
        required=True,
        help="A kbert finetune run folder, or its model.keras; or a classifier's kbert export folder (its "
        ".tflite files run on LiteRT without loading TensorFlow: fp32 the float32 file, int8 the "
        "dynamic_int8 one). A classifier's run folder that ran on LiteRT here (--precision int8, "
        "--runtime litert) runs without loading TensorFlow the next time, with the same flags, from "
        "the file $KBERT_CACHE_DIR keeps.",
    )
    # cli.main loads TensorFlow and the models before a command, except for an export folder here,
    # and a run folder whose LiteRT file this machine kept (lite_route.py).
    parser.set_defaults(without_tensorflow=_without_tensorflow)
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="Texts to predict on (or use --file).")
    add_flags(parser, _FLAG_TABLE)
    add_precision_flag(parser)
    parser.add_argument("--json", action="store_true", help="One JSON object per input line.")
    add_runner_flags(parser, shards=True)
    return parser


def _without_tensorflow(args):
    return is_export_folder(args) or LiteRoute.find(args) is not None


def _inputs(args, task):
    """[(text, text_b or None)] or, for squad, [(question, context)]; a blank --file line is
    (None, None), so that output line i answers input line i. Every text is checked to be text."""
    rows = _rows(args, task)
    for index, row in enumerate(rows):
        for part, text in zip(_part_names(args, task), row):
            if text is not None:
                check_text(text, _input_name(args, index, task, part))
    return rows


def _part_names(args, task):
    """How the user gave the two texts of a row: JSON keys of a --file line, else the flags."""
    if args.file:
        return ("question", "context") if task == "squad" else ("text", "text_b")
    return ("--question", "--context") if task == "squad" else ("TEXT", "--text-b")


def _input_name(args, index, task, part=None):
    """The user's name for row `index` (0-based) of the inputs, and `part` of it (default: the row)."""
    if args.file:
        return f"--file {args.file}:{index + 1}" + (
            f" ({part!r})" if part and task in ("pair", "squad") else ""
        )
    return f"{part or _part_names(args, task)[0]} {index + 1}"


def _rows(args, task):
    if args.file:
        if args.texts:
            raise UsageError("Give texts as arguments or --file, not both.")
        return _file_rows(args, task)
    if task == "squad":
        questions, contexts = args.question or [], args.context or []
        if not questions or len(questions) != len(contexts):
            raise UsageError(
                f"A squad model needs --question and --context pairs. Received {len(questions)} question(s) "
                f"and {len(contexts)} context(s)."
            )
        return list(zip(questions, contexts))
    if not args.texts:
        raise UsageError("Give texts to predict on as arguments, or --file FILE.")
    if task == "pair":
        if not args.text_b or len(args.text_b) != len(args.texts):
            raise UsageError(
                f"A pair model needs one --text-b per TEXT. Received {len(args.texts)} text(s) and "
                f"{len(args.text_b or [])} --text-b."
            )
        return list(zip(args.texts, args.text_b))
    return [(text, None) for text in args.texts]


def _file_rows(args, task):
    # exists, not isfile: --file <(command) is a pipe.
    if args.file != "-" and os.path.isdir(args.file):
        raise UsageError(f"--file {args.file!r} is a folder: give a text file.")
    if args.file != "-" and not os.path.exists(args.file):
        raise UsageError(f"--file {args.file!r}: no such file.")
    rows = [
        file_row(task, line, f"--file {args.file}:{number}")
        for number, line in enumerate(read_lines(args.file, "--file"), 1)
    ]
    if all(text is None for text, _ in rows):
        raise UsageError(f"--file {args.file} has no texts.")
    return rows


def run(args):
    # A UsageError goes up to cli.main: one line and status 2, or its traceback with --debug.
    if not 0 <= args.threshold <= 1:  # NaN too
        raise UsageError(f"--threshold is a probability: a number in [0, 1]. Received: {args.threshold}")
    if args.runner != LOCAL:
        if is_export_folder(args):
            raise UsageError(
                f"--model {args.model} is a kbert export folder; --runner runs a run folder's model.keras: "
                "pass --model the run folder."
            )
        return beam_inference.run_predict(args)
    check_runner_flags(args)
    if args.output is not None:
        raise UsageError(
            "--output is the folder of a Beam runner's shards (--runner direct, ...); without --runner "
            "the predictions go to stdout."
        )
    return _run(args)


def _run(args):
    if is_export_folder(args):
        return _run_export(args, export_classifier(args, has_text_b=bool(args.text_b)))
    if getattr(args, "lite_route", None) is not None:  # cli.main found it (and loaded no TensorFlow)
        return _run_export(args, route_classifier(args, args.lite_route))
    setup = load_for_inference(args, has_text_b=bool(args.text_b))
    task = setup.task
    if args.text_b and setup.stored.get("task") in ("classification", "multilabel"):
        raise UsageError(
            f"--text-b given, but {setup.model_path} was fine-tuned on single texts (--task "
            f"{setup.stored['task']}): leave out --text-b, or use a model fine-tuned with --task pair."
        )
    inputs = _inputs(args, task)
    given = sum(text is not None for text, _ in inputs)
    progress = Progress("predict", given if task not in READER_TASKS else 0, args.batch_size)
    predictor = RowPredictor(setup, args.batch_size, args.threshold)
    rows = predictor.rows(inputs, lambda index: _input_name(args, index, task), progress.update)
    progress.done()
    ran = predictor.text_predictor  # a classifier's; its forward names the LiteRT file it kept, if any
    route = LiteRoute.of(args) if ran is not None and getattr(ran.forward, "cache_path", None) else None
    if route is not None:
        route.keep(setup, ran)
    return _print_rows(args, task, rows)


def _run_export(args, found):
    """`found` (a LiteTextClassifier and its task: an export folder's, or a run folder's kept
    route) on LiteRT, without TensorFlow (predict_export.py)."""
    classifier, task = found
    inputs = _inputs(args, task)
    progress = Progress("predict", sum(text is not None for text, _ in inputs), args.batch_size)
    rows = export_rows(classifier, task, inputs, args.threshold, progress.update)
    progress.done()
    return _print_rows(args, task, rows)


def _print_rows(args, task, rows):
    for row in rows:
        print(json.dumps(row, ensure_ascii=False) if args.json else plain_line(task, row))
    return 0
