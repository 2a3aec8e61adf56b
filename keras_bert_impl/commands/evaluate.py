"""`kbert evaluate`: a fine-tuned model's metrics on a task file."""

import json
import os

import numpy as np

from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command, positive_int
from keras_bert_impl.commands.inference_setup import load_for_inference, text_predictor
from keras_bert_impl.commands.precision_flag import add_precision_flag
from keras_bert_impl.commands.progress import Progress
from keras_bert_impl.evaluation import compute_metrics, sequence_metrics
from keras_bert_impl.tasks import SEQUENCE_TASKS
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH


_HELP = "Print a fine-tuned model's metrics on a task file."
_DESCRIPTION = (
    "Run a model from `kbert finetune` over a labelled file laid out like its training file "
    "(the run folder's task.json supplies the layout; flags override it) and print the task's metrics: "
    "accuracy and macro-F1 (classification, pair), micro/macro-F1 and exact match (multilabel), token "
    "accuracy and seqeval-style entity F1 (tagging), exact match and F1 (squad, the official SQuAD v1.1 "
    "normalisation)."
)


def add_parser(subparsers):
    parser = add_command(subparsers, "evaluate", run, _HELP, _DESCRIPTION)
    parser.add_argument("--model", required=True, help="A kbert finetune run folder, or its model.keras.")
    parser.add_argument("--data", required=True, help="The labelled file to evaluate on.")
    parser.add_argument("--json", action="store_true", help="Print the metrics as one JSON object.")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="Default 32.")
    parser.add_argument(
        "--seq-len",
        type=int,
        default=None,
        help=f"Default: the run's training --seq-len, else {DEFAULT_SEQUENCE_LENGTH}.",
    )
    add_precision_flag(parser)
    task_data.add_data_flags(parser, defaults_from_run=True)
    return parser


def run(args):
    # A UsageError goes up to cli.main: one line and status 2, or its traceback with --debug.
    return _run(args)


def _run(args):
    from keras_bert_impl.tokenization import BertPreprocessor

    if not os.path.isfile(args.data):
        raise UsageError(f"--data {args.data!r}: no such file.")
    setup = load_for_inference(args, has_text_b=bool(args.text_b_column))
    model, model_path, stored, task, seq_len = setup[:5]
    settings = task_data.data_settings(args, task, stored)
    preprocessor = BertPreprocessor(
        model.backbone.vocabulary, lowercase=model.backbone.lowercase, sequence_length=seq_len
    )
    label_names = getattr(model, "label_names", None)
    if task != "squad" and label_names is None:
        raise UsageError(
            f"{model_path} has no label_names: fine-tune it with kbert finetune, which saves them."
        )
    reader = task_data.make_reader(
        task, preprocessor, settings, labels=label_names, batch_size=args.batch_size, on_error=args.on_error
    )
    if task in SEQUENCE_TASKS:
        metrics = _sequence_metrics(args, setup, reader, label_names)
    else:
        dataset = task_data.read_checked(
            reader, args.data, "--data", "evaluate", **({} if task == "squad" else {"build_labels": False})
        )
        rows = reader.report.examples if task != "squad" else reader.report.counters["windows"]
        progress = Progress(
            "evaluate", rows, args.batch_size, unit="examples" if task != "squad" else "windows"
        )
        metrics = compute_metrics(task, model, reader, dataset, label_names, progress)
    for same_count in ("num_examples", "num_questions"):  # what "examples" counts, under one name
        metrics.pop(same_count, None)
    _print_metrics({"task": task, "examples": reader.report.examples, **metrics}, args.json)
    return 0


def _sequence_metrics(args, setup, reader, label_names):
    """Raw texts in length-sorted batches (TextPredictor): the metrics of padding every row to
    --seq-len, a fraction of the work on short texts."""
    task = setup.task
    texts, texts_b, targets = task_data.read_checked(
        reader, args.data, "--data", "evaluate", method="read_examples", build_labels=False
    )
    progress = Progress("evaluate", len(texts), args.batch_size, unit="examples")
    outputs = text_predictor(setup, args.batch_size).predict(
        texts, texts_b if task == "pair" else None, progress=progress.update
    )
    progress.done()
    return sequence_metrics(
        task, outputs, np.stack(targets) if task == "multilabel" else targets, label_names
    )


def _print_metrics(metrics, as_json):
    """One JSON line, or `key: value` lines then a table per nested dict of dicts."""
    if as_json:
        print(json.dumps(metrics, sort_keys=True))
        return
    for key, value in metrics.items():
        if isinstance(value, float):
            print(f"{key}: {value:.4f}")
        elif not isinstance(value, (dict, list)):
            print(f"{key}: {value}")
    for key, value in metrics.items():
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            _print_table(key, value)


def _print_table(title, rows):
    """A per-class (per-label, per-type) dict of dicts as aligned columns."""
    columns = list(next(iter(rows.values())))
    width = max(len(str(name)) for name in rows) + 2
    print(f"{title}:")
    print("  " + "".ljust(width) + "".join(c.rjust(11) for c in columns))
    for name, values in rows.items():
        cells = "".join((f"{v:.4f}" if isinstance(v, float) else str(v)).rjust(11) for v in values.values())
        print("  " + str(name).ljust(width) + cells)
