"""`kbert predict`: a fine-tuned model's predictions on strings or a file."""

import json
import os
import re

import numpy as np

from keras_bert_impl.commands import beam_inference, task_data
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_flags, positive_int
from keras_bert_impl.commands.inference_setup import load_for_inference, text_predictor
from keras_bert_impl.commands.precision_flag import add_precision_flag
from keras_bert_impl.commands.progress import Progress
from keras_bert_impl.commands.runner_flags import LOCAL, add_runner_flags, check_runner_flags
from keras_bert_impl.commands.text_lines import read_lines
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH


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
    parser = subparsers.add_parser(
        "predict", help="Predict with a fine-tuned model on strings or a text file.", description=_DESCRIPTION
    )
    parser.add_argument("--model", required=True, help="A kbert finetune run folder, or its model.keras.")
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="Texts to predict on (or use --file).")
    add_flags(parser, _FLAG_TABLE)
    add_precision_flag(parser)
    parser.add_argument("--json", action="store_true", help="One JSON object per input line.")
    add_runner_flags(parser, shards=True)
    parser.set_defaults(func=run)
    return parser


def _inputs(args, task):
    """[(text, text_b or None)] or, for squad, [(question, context)]; a blank --file line is
    (None, None), so that output line i answers input line i. Every text is checked to be text."""
    rows = _rows(args, task)
    for index, row in enumerate(rows):
        for part, text in zip(_part_names(args, task), row):
            if text is None:
                continue
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as e:
                bad = text[e.start]
                if 0xDC80 <= ord(bad) <= 0xDCFF:  # Python's stand-in for an undecodable byte of argv
                    what = (
                        f"the byte {ord(bad) - 0xDC00:#04x} at character {e.start}, which is not UTF-8 (the "
                        "shell passed bytes its locale could not decode)"
                    )
                else:
                    what = (
                        f"{bad!r} at character {e.start}, a lone UTF-16 surrogate (a JSON escape such as "
                        "\\ud800 alone), which is no character"
                    )
                raise UsageError(
                    f"{_input_name(args, index, task, part)} holds {what}: pass the text as UTF-8."
                ) from None
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
    rows = []
    for number, line in enumerate(read_lines(args.file, "--file"), 1):
        if not line.strip():
            rows.append((None, None))
        elif task in ("pair", "squad"):
            rows.append(_json_pair(args, task, number, line))
        else:
            rows.append((line, None))
    if all(text is None for text, _ in rows):
        raise UsageError(f"--file {args.file} has no texts.")
    return rows


def _json_pair(args, task, number, line):
    """The two strings of a pair or squad --file line (a JSON object)."""
    keys = ("text", "text_b") if task == "pair" else ("question", "context")
    try:
        row = json.loads(line)
        pair = (row[keys[0]], row[keys[1]])
    except (json.JSONDecodeError, KeyError, TypeError):
        pair = None
    if pair is None or not all(isinstance(t, str) for t in pair):
        raise UsageError(
            f"--file {args.file}:{number}: a {task} model needs a JSON object with string {list(keys)} per "
            f"line. Received: {line[:80]!r}"
        )
    return pair


def run(args):
    # A UsageError goes up to cli.main: one line and status 2, or its traceback with --debug.
    if args.runner != LOCAL:
        return beam_inference.run_predict(args)
    check_runner_flags(args)
    if args.output is not None:
        raise UsageError(
            "--output is the folder of a Beam runner's shards (--runner direct, ...); without --runner "
            "the predictions go to stdout."
        )
    return _run(args)


def _softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def _run(args):
    from keras_bert_impl.tokenization import BertPreprocessor

    if not 0 <= args.threshold <= 1:  # NaN too
        raise UsageError(f"--threshold is a probability: a number in [0, 1]. Received: {args.threshold}")

    setup = load_for_inference(args, has_text_b=bool(args.text_b))
    model, model_path, stored, task, seq_len = setup[:5]
    if args.text_b and stored.get("task") in ("classification", "multilabel"):
        raise UsageError(
            f"--text-b given, but {model_path} was fine-tuned on single texts (--task {stored['task']}): "
            "leave out --text-b, or use a model fine-tuned with --task pair."
        )
    rows = _inputs(args, task)
    backbone = model.backbone
    if task in ("squad", "tagging"):
        preprocessor = BertPreprocessor(
            backbone.vocabulary, lowercase=backbone.lowercase, sequence_length=seq_len
        )
        if task == "squad":
            return _predict_squad(args, model, preprocessor, rows, stored)
        return _predict_tags(args, model, preprocessor, rows)
    return _predict_labels(args, setup, rows)


def _predict_labels(args, setup, rows):
    """A classifier's lines; TextPredictor tokenizes for itself."""
    model, task = setup.model, setup.task
    names = model.label_names or [str(i) for i in range(model.num_classes)]
    given = [(a, b) for a, b in rows if a is not None]
    progress = Progress("predict", len(given), args.batch_size)
    # Sorted by length and padded per batch (to its longest row), not to --seq-len: the same
    # numbers (within 1e-5), several times faster on short texts.
    outputs = text_predictor(setup, args.batch_size).predict(
        [a for a, _ in given], [b for _, b in given] if task == "pair" else None, progress=progress.update
    )
    progress.done()
    from_logits = "logits" in outputs
    scores = iter(outputs["logits"] if from_logits else outputs.get("probabilities", []))
    for text, text_b in rows:
        if text is None:
            _print_empty(args, task, {"text": None, "text_b": None} if task == "pair" else {"text": ""})
            continue
        result, shown = _labels_of(args, task, names, next(scores), from_logits)
        result = {"text": text, **result}
        if text_b is not None:
            result["text_b"] = text_b
        print(json.dumps(result, ensure_ascii=False) if args.json else f"{shown}\t{text}")
    return 0


def _labels_of(args, task, names, row, from_logits):
    """(the JSON fields, the plain line's columns) of one text's scores."""
    if task == "multilabel":
        probs = 1 / (1 + np.exp(-row)) if from_logits else row
        chosen = [names[i] for i in np.flatnonzero(probs >= args.threshold)]
        fields = {"labels": chosen, "probabilities": {n: float(p) for n, p in zip(names, probs)}}
        return fields, ",".join(chosen) or "(none)"
    probs = _softmax(row) if from_logits else row
    best = int(probs.argmax())
    return {"label": names[best], "probability": float(probs[best])}, f"{names[best]}\t{probs[best]:.4f}"


def _print_empty(args, task, fields):
    """The result of a blank input line: empty fields, or nulls in JSON."""
    if args.json:
        empty = {
            "multilabel": {"labels": None, "probabilities": None},
            "tagging": {"tags": []},
            "squad": {"answer": None},
        }.get(task, {"label": None, "probability": None})
        print(json.dumps({**fields, **empty}, ensure_ascii=False))
    else:
        print({"multilabel": "\t", "tagging": "", "squad": "\t"}.get(task, "\t\t"))


def _predict_tags(args, model, preprocessor, rows):
    """Tags each whitespace-separated word with the prediction on its first wordpiece (as trained)."""
    from keras_bert_impl.data.readers import MalformedRowError, TaggingReader

    names = model.label_names or [str(i) for i in range(model.num_classes)]
    given = [text for text, _ in rows if text is not None]
    positions = [index for index, (text, _) in enumerate(rows) if text is not None]
    # The reader does the word -> wordpiece alignment exactly as in training; the tags here are placeholders.
    reader = TaggingReader(preprocessor, labels=names, batch_size=args.batch_size)
    try:
        dataset = reader.read_sentences(
            [[(word, names[0]) for word in text.split()] for text in given], source="predict"
        )
    except MalformedRowError as e:  # its line i is given[i - 1]: name the user's input instead
        where = _input_name(args, positions[e.line - 1], "tagging") if e.line else "predict"
        raise UsageError(f"{where}: {e.reason}. Fix or leave out that text.") from None
    tagged = []
    for x, _, weights in dataset:
        logits = np.asarray(model.predict_on_batch(x)["logits"])
        for row_logits, row_weights in zip(logits, np.asarray(weights)):
            words = given[len(tagged)].split()
            tagged.append(list(zip(words, [names[t] for t in row_logits.argmax(-1)[row_weights > 0]])))
    answers = iter(tagged)
    for text, _ in rows:
        if text is None:
            _print_empty(args, "tagging", {"text": ""})
            continue
        pairs = next(answers)
        if args.json:
            print(
                json.dumps(
                    {"text": text, "tags": [{"word": w, "tag": t} for w, t in pairs]}, ensure_ascii=False
                )
            )
        else:
            print(" ".join(f"{w}/{t}" for w, t in pairs))
    return 0


def _predict_squad(args, model, preprocessor, rows, stored):
    from keras_bert_impl import evaluation
    from keras_bert_impl.data.readers import MalformedRowError, SquadReader

    reader = SquadReader(
        preprocessor,
        doc_stride=stored.get("doc_stride", task_data.DEFAULTS["doc_stride"]),
        max_query_length=stored.get("max_query_length", task_data.DEFAULTS["max_query_length"]),
        version_2_with_negative=True,
        batch_size=args.batch_size,
    )
    try:
        dataset = reader.read_data(_squad_data(rows), source="predict")
    except MalformedRowError as e:  # the question ids are the rows' indices
        found = re.search(r"\bid (\d+)\b", e.location or "")
        where = _input_name(args, int(found.group(1)), "squad") if found else "predict"
        raise UsageError(f"{where}: {e.reason}. Fix or leave out that question.") from None
    starts, ends = [], []
    for x, _ in dataset:
        out = model.predict_on_batch(x)
        starts.append(np.asarray(out["start_logits"]))
        ends.append(np.asarray(out["end_logits"]))
    answers = evaluation.decode_squad_predictions(
        reader.features, np.concatenate(starts), np.concatenate(ends)
    )
    for i, (question, _) in enumerate(rows):
        if question is None:
            _print_empty(args, "squad", {"question": None})
            continue
        answer = answers.get(str(i), "")
        print(
            json.dumps({"question": question, "answer": answer}, ensure_ascii=False)
            if args.json
            else f"{answer}\t{question}"
        )
    return 0


def _squad_data(rows):
    """The (question, context) rows as a SQuAD 2.0 file, each question's id its row's index."""
    paragraphs = [
        {
            "context": context,
            "qas": [{"id": str(i), "question": question, "answers": [], "is_impossible": True}],
        }
        for i, (question, context) in enumerate(rows)
        if question is not None
    ]
    return {"version": "1.1", "data": [{"title": "predict", "paragraphs": paragraphs}]}
