"""`kbert export`: a fine-tuned model into SavedModels for TF Serving and TFLite files,
checked and measured in the runtimes that run them. The work is the export wing's
(`keras_bert_impl_export`, the top-level export/ folder); this module reads the flags and the
files and imports the wing lazily, the one place the library reaches it."""

import argparse
import functools
import json
import os
import re
import sys
import zipfile

from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command, positive_int
from keras_bert_impl.commands.output_files import refuse_replacing_inputs
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH
from keras_bert_impl.conversion.input_contract import (
    EXPORT_FORMATS,
    GPU_QUANTIZATIONS,
    HUB_FORMATS,
    INTEGER_ONLY_QUANTIZATIONS,
    QUANTIZATIONS,
    RENAMED_QUANTIZATIONS,
    STATIC_QUANTIZATIONS,
    check_quantization,
)

# keras_bert_impl.models.bert_embedder.POOLING, spelled here so `kbert --help` needs no Keras.
EMBEDDER_POOLING = ("cls", "mean", "max")
DEFAULT_NAME = "bert"
DEFAULT_REPEATS = 20


_HELP = "Export a model to TF Serving SavedModels and TFLite files, with a report."
DESCRIPTION = (
    "Write OUTPUT/serving/NAME/1 (raw text in, for TF Serving, with warm-up requests), "
    "OUTPUT/serving/NAME_ids/1 (token ids in, no tensorflow-text op), OUTPUT/tflite/NAME_QUANT.tflite "
    "(builtin ops only, any batch and length), OUTPUT/mediapipe/NAME.tflite (with MediaPipe Tasks "
    "metadata), OUTPUT/text/NAME_text_in.tflite (strings in, tensorflow-text's tokenizer inside), "
    "vocab.txt, labels.txt and export.json; with --validation, OUTPUT/report.md/.json/.png "
    "(size, latency, accuracy and difference from the Keras model of every artifact). The model carries "
    "its vocabulary, casing and label names. OUTPUT appears only when everything is written."
)
# kbert export's own flags, in --help's order: (flag, add_argument's keywords).
FLAGS = (
    (
        "--model",
        dict(
            required=True,
            help="A kbert finetune run folder or a .keras head; a .keras backbone (kbert convert) "
            "is exported as a sentence embedder (mean pooling, L2-normalised).",
        ),
    ),
    (
        "--output",
        dict(required=True, help="Folder to create; refused if it holds anything (see --overwrite)."),
    ),
    (
        "--formats",
        dict(
            default=",".join(EXPORT_FORMATS),
            help=f"Comma-separated subset of {','.join(EXPORT_FORMATS)}. Default: all of those. "
            "Or huggingface alone: OUTPUT becomes a folder transformers loads with from_pretrained(OUTPUT) "
            "(config.json, model.safetensors, vocab.txt, tokenizer files, README.md model card); a model "
            "transformers cannot express as it is (mean pooling, sinusoidal positions, int8) is refused. "
            "Or sentence_transformers alone, for a backbone or BertEmbedder: the same folder plus the "
            "modules SentenceTransformer(OUTPUT) pools with (see --pooling, --normalize, --seq-len).",
        ),
    ),
    (
        "--quantizations",
        dict(
            default=",".join(QUANTIZATIONS),
            help=f"TFLite precisions, comma-separated subset of {','.join(QUANTIZATIONS)}. "
            "Default: all (int8_mixed calibrates on --calibration: a run folder's training file unless "
            "given). Also, for classifiers, the integer-only "
            f"files {' and '.join(INTEGER_ONLY_QUANTIZATIONS)} (every op on int8, or int16 "
            "activations with int8 weights; static [1, --seq-len]; calibrated the same way), "
            "for phone NPUs and the Edge TPU, and the GPU delegate's file "
            f"{' and '.join(GPU_QUANTIZATIONS)} (the same static graph, float16 weights): named, never "
            "by default.",
        ),
    ),
    (
        "--validation",
        dict(
            default=None,
            help="Examples to check and measure every artifact on (the training file's layout; "
            "for an embedder, one text per line). Writes the report.",
        ),
    ),
    (
        "--calibration",
        dict(
            default=None,
            help="Real examples for int8_mixed's and the integer-only files' calibration, same layout. "
            "Default: the run's training file.",
        ),
    ),
    (
        "--seq-len",
        dict(
            type=int,
            default=None,
            help="Tokens per text in the raw-text and MediaPipe models (longer texts are truncated). "
            f"Default: the run's training --seq-len, else {DEFAULT_SEQUENCE_LENGTH}.",
        ),
    ),
    (
        "--static-lengths",
        dict(
            default=None,
            metavar="S1,S2",
            help="Comma-separated lengths, e.g. 64,128: each static file "
            f"({', '.join(STATIC_QUANTIZATIONS)}) "
            "is written once per length, as tflite/NAME_QUANT_S.tflite at [1, S], so an app runs the "
            "shortest that fits its text instead of resizing tensors. Default: one file at --seq-len.",
        ),
    ),
    (
        "--name",
        dict(
            default=DEFAULT_NAME,
            help=f"Model name in TF Serving's layout and the file names. Default {DEFAULT_NAME}.",
        ),
    ),
    (
        "--pair",
        dict(
            action="store_true",
            help="A classifier of text pairs, when the model is a .keras file without its run folder.",
        ),
    ),
    (
        "--peft-adapter",
        dict(
            action="store_true",
            help="--formats huggingface of a LoRA model (kbert finetune --lora-rank): instead of the merged "
            "model, write OUTPUT/base, the transformers folder of the model without its adapters (its head "
            "left to the adapter), and OUTPUT/adapter, the PEFT LoRA adapter that "
            "peft.PeftModel.from_pretrained(AutoModelFor...from_pretrained('OUTPUT/base'), 'OUTPUT/adapter') "
            "loads.",
        ),
    ),
    ("--overwrite", dict(action="store_true", help="Replace an existing OUTPUT.")),
    (
        "--pooling",
        dict(
            choices=EMBEDDER_POOLING,
            default=None,
            help="--formats sentence_transformers of a backbone: how its last layer is pooled. Default mean.",
        ),
    ),
    (
        "--normalize",
        dict(
            action=argparse.BooleanOptionalAction,
            default=None,
            help="--formats sentence_transformers of a backbone: L2-normalise the vectors. Default yes.",
        ),
    ),
    (
        "--repeats",
        dict(
            type=positive_int,
            default=DEFAULT_REPEATS,
            help=f"Latency rounds in the report. Default {DEFAULT_REPEATS}.",
        ),
    ),
)


def add_parser(subparsers):
    parser = add_command(subparsers, "export", run, _HELP, DESCRIPTION, FLAGS)
    task_data.add_data_flags(parser, defaults_from_run=True)
    return parser


def _choices(flag, value, allowed):
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise UsageError(f"{flag} takes a comma-separated subset of {','.join(allowed)}. Received: {value!r}")
    twice = sorted({v for v in items if items.count(v) > 1})
    if twice:
        raise UsageError(
            f"{flag} names {', '.join(twice)} more than once. Received: {value!r}; give each once."
        )
    return items


def _static_length_values(value):
    """--static-lengths as ints (None when not given), read before the model loads."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    # str.isdigit() takes "²" and other digits int() refuses ("invalid literal for int()").
    if not items or not all(re.fullmatch(r"[0-9]+", v) for v in items):
        raise UsageError(
            f"--static-lengths takes comma-separated lengths in wordpieces, e.g. 64,128. Received: {value!r}"
        )
    return [int(v) for v in items]


def _static_lengths(value, quantizations, formats, model):
    """--static-lengths checked against the model, before the first progress line so that a
    refusal is the one line."""
    lengths = _static_length_values(value)
    if lengths is None:
        return None
    from keras_bert_impl_export.exporter import check_static_lengths

    try:
        return check_static_lengths(lengths, quantizations, formats, model)
    except ValueError as e:
        raise UsageError(str(e).replace("static_lengths", "--static-lengths")) from None


def _read_lines(path, flag, pair):
    """One text per line, or for pair models a JSON object {text, text_b} (or {question, context})."""
    rows = []
    with open(path, encoding="utf-8-sig") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if not pair:
                rows.append(line)
                continue
            try:
                row = json.loads(line)
                keys = ("question", "context") if "question" in row else ("text", "text_b")
                rows.append((row[keys[0]], row[keys[1]]))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise UsageError(
                    f"{flag} {path}:{number}: a pair model needs a JSON object with text and text_b "
                    f"(or question and context) per line. Received: {line[:80]!r}"
                ) from None
    return rows


def _examples(path, flag, task, model, settings, on_error="fail"):
    """(examples, labels) of a task file: texts or (a, b) pairs, and class ids or None."""
    if not os.path.isfile(path):
        raise UsageError(f"{flag} {path!r}: no such file.")
    if task in task_data.SEQUENCE_TASKS:
        from keras_bert_impl.tokenization import BertPreprocessor

        # The reader checks rows and labels; read_examples leaves the tokenizing to the export.
        reader = task_data.make_reader(
            task, BertPreprocessor.from_model(model), settings, labels=model.label_names, on_error=on_error
        )
        texts, texts_b, targets = task_data.read_checked(
            reader, path, flag, "export", method="read_examples", build_labels=False
        )
        examples = list(zip(texts, texts_b)) if task == "pair" else texts
        import numpy as np

        labels = np.stack(targets) if task == "multilabel" else np.asarray(targets)
    else:
        examples, labels = _read_lines(path, flag, pair=task == "squad"), None
    if not examples:
        raise UsageError(f"{flag} {path} holds no examples.")
    return examples, labels


def _log(line):
    print(f"kbert export: {line.strip()}", file=sys.stderr, flush=True)


def _merged(model, model_path):
    """`load_model`'s (model, model_path), a LoRA model's (a `kbert finetune --lora-rank` run)
    adapters folded into plain Dense kernels: every format is written from the merged weights."""
    from keras_bert_impl.models import merge_lora

    settings = getattr(getattr(model, "backbone", model), "lora_settings", None)
    if settings is None:
        return model, model_path
    _log(f"LoRA rank {settings['rank']} on {', '.join(settings['targets'])}: merged into the kernels")
    return merge_lora(model), model_path


def load_for_export(model_flag, seq_len=None, pair=False):
    """(model, model_path, stored run settings, task, pair, sequence length) of `--model`:
    a bare backbone becomes a sentence embedder; the length defaults to the run's."""
    import keras_bert_impl as kb
    from keras_bert_impl.commands.model_files import load_model, run_sequence_length

    model, model_path = _merged(*load_model(model_flag))
    stored = task_data.read_task_file(os.path.dirname(model_path)) or {}
    if isinstance(model, kb.BertBackbone):
        model = kb.BertEmbedder(model, pooling="mean", normalize=True)
    backbone = getattr(model, "backbone", None)
    if backbone is None or backbone.vocabulary is None:
        raise UsageError(
            f"{model_path} carries no vocabulary. Re-create it with kbert convert or kbert finetune "
            "(which keep the checkpoint's vocab.txt), or attach one: backbone.set_vocabulary('vocab.txt') "
            "and save."
        )
    pair = bool(pair or stored.get("task") == "pair")
    if isinstance(model, kb.BertEmbedder):
        task = "embedding"
    else:
        try:
            # A QuantizationAwareClassifier exports its float classifier (and its learned int8_only).
            task = task_data.task_of_model(getattr(model, "classifier", model), has_text_b=pair)
        except ValueError as e:
            raise UsageError(str(e).replace("evaluate and predict take", "kbert export takes")) from None
    seq_len = run_sequence_length(seq_len, stored, backbone)
    return model, model_path, stored, task, pair, seq_len


def write_export(
    model,
    output,
    *,
    name,
    seq_len,
    pair,
    formats,
    quantizations=QUANTIZATIONS,
    calibration=None,
    static_lengths=None,
    overwrite=False,
    finish=None,
):
    """The export wing's `export_model`, its refusals as UsageError."""
    from keras_bert_impl.conversion.tflite_converter import ConversionError
    from keras_bert_impl_export.exporter import ExportExistsError, export_model

    try:
        return export_model(
            model,
            output,
            name=name,
            sequence_length=seq_len,
            pair=pair,
            formats=formats,
            quantizations=quantizations,
            calibration_texts=calibration,
            static_lengths=static_lengths,
            overwrite=overwrite,
            finish=finish,
            log=_log,
        )
    except (ExportExistsError, ConversionError, ValueError) as e:
        raise UsageError(str(e).replace("static_lengths", "--static-lengths")) from None


# The task-file layout flags (task_data.add_data_flags, defaults from the run: None when not given).
DATA_FLAGS = {
    "--format": "format",
    "--text-column": "text_column",
    "--text-b-column": "text_b_column",
    "--label-column": "label_column",
    "--columns": "columns",
    "--tag-format": "tag_format",
    "--tag-column": "tag_column",
    "--doc-stride": "doc_stride",
    "--max-query-length": "max_query_length",
}


def _given_flags(args):
    """The flags given a value other than their default."""
    given = {
        "--quantizations": args.quantizations != ",".join(QUANTIZATIONS),
        "--validation": args.validation is not None,
        "--calibration": args.calibration is not None,
        "--static-lengths": args.static_lengths is not None,
        "--name": args.name != DEFAULT_NAME,
        "--pair": args.pair,
        "--repeats": args.repeats != DEFAULT_REPEATS,
        "--seq-len": args.seq_len is not None,
        "--pooling": args.pooling is not None,
        "--normalize": args.normalize is not None,
        "--peft-adapter": args.peft_adapter,
    }
    given.update({flag: getattr(args, dest) is not None for flag, dest in DATA_FLAGS.items()})
    given.update(
        {
            "--header": args.header is True,
            "--no-header": args.header is False,
            "--on-error": args.on_error != "fail",
        }
    )
    return [flag for flag, present in given.items() if present]


def _unused_flags(args, formats, quantizations, learned):
    """{flag: what would use it} for every flag given that `formats` and `quantizations` do not
    use: such a flag is refused, never dropped without a word. `learned`: the model is a
    QuantizationAwareClassifier, whose int8_only files take the ranges it learned."""
    from keras_bert_impl_export.exporter import calibrated_quantizations

    hub = formats[0] if formats[0] in HUB_FORMATS else None
    calibrated = [] if hub else calibrated_quantizations(formats, quantizations, learned=learned)
    reads_task_file = not hub and (args.validation is not None or bool(calibrated))
    layout = "the task files --validation and --calibration, when one is read"
    uses = {
        "--quantizations": (not hub, "the .tflite formats (tflite, mediapipe)"),
        "--validation": (not hub, "the report of the TF Serving and TFLite formats"),
        "--calibration": (
            bool(calibrated),
            "int8_mixed and the integer-only files (a quantization-aware model's "
            "int8_only takes the ranges it learned)",
        ),
        "--seq-len": (hub != "huggingface", "the TF Serving and TFLite formats and sentence_transformers"),
        "--static-lengths": (
            not hub and "tflite" in formats and bool(set(quantizations) & set(STATIC_QUANTIZATIONS)),
            "the static files of --formats tflite, and no static file is asked for: add one of "
            f"{', '.join(STATIC_QUANTIZATIONS)} to --quantizations",
        ),
        "--name": (not hub, "the TF Serving and TFLite formats' file names"),
        "--pair": (not hub, "the TF Serving and TFLite formats"),
        "--pooling": (hub == "sentence_transformers", "--formats sentence_transformers"),
        "--normalize": (hub == "sentence_transformers", "--formats sentence_transformers"),
        "--peft-adapter": (hub == "huggingface", "--formats huggingface of a LoRA model"),
        "--repeats": (not hub and args.validation is not None, "the report's latency (with --validation)"),
        **{
            flag: (reads_task_file, layout) for flag in (*DATA_FLAGS, "--header", "--no-header", "--on-error")
        },
    }
    return {flag: uses[flag][1] for flag in _given_flags(args) if not uses[flag][0]}


def refuse_unused_flags(args, formats, quantizations, learned=False):
    """One line naming every flag given that this combination of --formats and --quantizations
    would drop without a word (a --calibration file that did not exist, exit 0), and each
    quantization asked for that no format writes. Before the model loads."""
    unused = _unused_flags(args, formats, quantizations, learned)
    them = "them" if len(unused) > 1 else "it"
    if unused and formats[0] in HUB_FORMATS:
        raise UsageError(
            f"--formats {formats[0]} writes the float model and its tokenizer files; it takes no "
            f"{', '.join(unused)}. Leave {them} out, or run kbert export again for the formats that use "
            f"{them}."
        )
    if unused:
        reasons = "; ".join(f"{flag} is for {what}" for flag, what in unused.items())
        raise UsageError(
            f"--formats {','.join(formats)} with --quantizations {','.join(quantizations)} uses no "
            f"{', '.join(unused)} ({reasons}). Leave {them} out, or ask for a file that uses {them}."
        )
    if formats[0] in HUB_FORMATS or "--quantizations" not in _given_flags(args):
        return
    from keras_bert_impl_export.exporter import written_quantizations

    unwritten = [q for q in quantizations if q not in written_quantizations(formats, quantizations)]
    if unwritten:
        raise UsageError(
            f"--quantizations {','.join(unwritten)}: --formats {','.join(formats)} writes no such file "
            "(tflite writes every precision; mediapipe float32, float16, dynamic_int8 and int8_only). Leave "
            f"{'them' if len(unwritten) > 1 else 'it'} out, or add --formats tflite."
        )


def _saved_as_quantization_aware(model_flag):
    """Whether --model's .keras archive holds a QuantizationAwareClassifier, read from its
    config.json without loading it (False where it cannot be read: loading then says why)."""
    from keras_bert_impl.commands.model_files import resolve_model_path

    try:
        with zipfile.ZipFile(resolve_model_path(model_flag)) as archive:
            config = json.loads(archive.read("config.json"))
    except (UsageError, OSError, KeyError, ValueError, zipfile.BadZipFile):
        return False
    return isinstance(config, dict) and config.get("class_name") == "QuantizationAwareClassifier"


def _loaded_for_hub(args):
    """(model, model_path) of --model: a LoRA model merged, unless --peft-adapter writes its
    adapters (refused on a model without them)."""
    from keras_bert_impl.commands.model_files import load_model

    model, model_path = load_model(args.model)
    if not args.peft_adapter:
        return _merged(model, model_path)
    settings = getattr(getattr(model, "backbone", model), "lora_settings", None)
    if settings is None:
        raise UsageError(
            f"--peft-adapter: --model {args.model} has no LoRA adapters (a kbert finetune --lora-rank run): "
            "leave --peft-adapter out to export it as a transformers folder."
        )
    _log(f"LoRA rank {settings['rank']} on {', '.join(settings['targets'])}: written as a PEFT adapter")
    return model, model_path


def _write_hub_folder(kind, model, model_path, args):
    """The wing's writer of `kind` on the loaded `model`; returns the `TransformersModel` written."""
    from keras_bert_impl_export import huggingface

    if args.peft_adapter:
        return huggingface.export_peft_adapter(
            model, args.output, overwrite=args.overwrite, source=model_path
        )
    if kind == "huggingface":
        run_folder = os.path.dirname(model_path) if os.path.isdir(args.model) else None
        return huggingface.export_huggingface(
            model, args.output, overwrite=args.overwrite, run_folder=run_folder, source=model_path
        )
    return huggingface.export_sentence_transformers(
        model,
        args.output,
        pooling=args.pooling,
        normalize=args.normalize,
        max_seq_length=args.seq_len or DEFAULT_SEQUENCE_LENGTH,
        overwrite=args.overwrite,
        source=model_path,
    )


def export_hub_folder(kind, args):
    """`kbert export --formats huggingface` (a transformers folder; with --peft-adapter, the base
    and its PEFT adapter) or `sentence_transformers` (that folder plus its pooling modules): the
    model of a run folder or .keras file at --output (the wing's `export_huggingface`,
    `export_peft_adapter` / `export_sentence_transformers`), refusals as UsageError; the flags
    checked first (`check_flags`)."""
    from keras_bert_impl_export.exporter import ExportExistsError
    from keras_bert_impl_export.huggingface import NotExpressibleError

    model, model_path = _loaded_for_hub(args)
    _log(f"{type(model).__name__} from {model_path} as a {kind.replace('_', '-')} folder")
    try:
        described = _write_hub_folder(kind, model, model_path, args)
    except NotExpressibleError as e:
        raise UsageError(
            f"--model {args.model}: {kind.replace('_', '-')} cannot hold this model as it is: {e}"
        ) from None
    except (ExportExistsError, ValueError) as e:
        raise UsageError(str(e).replace("max_seq_length", "--seq-len")) from None
    if args.peft_adapter:
        base, adapter = os.path.join(args.output, "base"), os.path.join(args.output, "adapter")
        _log(f"wrote {base}: {described.architecture} without the adapters, and {adapter}: the PEFT adapter")
        return 0
    loader = "from_pretrained" if kind == "huggingface" else "SentenceTransformer"
    _log(f"wrote {args.output}: {described.architecture} ({loader}({args.output!r}))")
    return 0


def _formats(args):
    """--formats checked (a hub format given alone), and --output checked against the inputs."""
    formats = _choices("--formats", args.formats, EXPORT_FORMATS + HUB_FORMATS)
    refuse_replacing_inputs(
        "--output",
        args.output,
        {"--model": args.model, "--validation": args.validation, "--calibration": args.calibration},
    )
    if set(formats) & set(HUB_FORMATS) and len(formats) > 1:
        hub = formats[0] if formats[0] in HUB_FORMATS else formats[1]
        raise UsageError(
            f"--formats {hub} makes --output a hub folder and is given alone. Received: "
            f"{args.formats!r}; run kbert export once for it and once for the other formats, into two "
            "folders."
        )
    return formats


def check_flags(args):
    """(formats, quantizations, learned) of the flags, each checked, and every flag that this
    combination leaves unused refused (`refuse_unused_flags`): all before the model loads.
    `learned`: --model holds a QuantizationAwareClassifier."""
    formats = _formats(args)
    if args.peft_adapter and formats[0] == "sentence_transformers":
        raise UsageError(
            "--peft-adapter writes the adapters of a LoRA model for --formats huggingface; --formats "
            "sentence_transformers writes its merged weights. Leave --peft-adapter out, or use --formats "
            "huggingface."
        )
    if set(formats) & set(HUB_FORMATS):
        refuse_unused_flags(args, formats[:1], ())
        return formats, (), False
    for renamed in set(args.quantizations.replace(" ", "").split(",")) & set(RENAMED_QUANTIZATIONS):
        try:
            check_quantization("--quantizations", renamed)
        except ValueError as error:
            raise UsageError(str(error)) from None
    quantizations = _choices("--quantizations", args.quantizations, QUANTIZATIONS + STATIC_QUANTIZATIONS)
    learned = _saved_as_quantization_aware(args.model)
    refuse_unused_flags(args, formats, quantizations, learned)
    _static_length_values(args.static_lengths)
    return formats, quantizations, learned


def _calibration(args, stored, formats, quantizations, learned, read):
    """The calibration examples (--calibration, else the run's training file) when a file asked
    for is calibrated, else None. `read(path, flag)`: `_examples` of the model's task."""
    calibration_path = args.calibration or stored.get("train")
    refuse_replacing_inputs("--output", args.output, {"the run's training file": calibration_path})
    from keras_bert_impl_export.exporter import calibrated_quantizations

    calibrated = calibrated_quantizations(formats, quantizations, learned=learned)
    if not calibrated:
        return None
    if not calibration_path:
        raise UsageError(
            f"{calibrated[0]} needs real examples to calibrate on: pass --calibration FILE (or leave "
            f"{calibrated[0]} out of --quantizations)."
        )
    return read(calibration_path, "--calibration")[0]


def _report_writer(validation, model, seq_len, pair, repeats):
    """The export's `finish`: the report on the `validation` (examples, labels), written in the
    work folder and printed; None without validation examples."""
    if validation is None:
        return None

    def finish(work, manifest):
        from keras_bert_impl_export.export_signatures import ExportSignatures
        from keras_bert_impl_export.report import build_report

        _log(f"report on {len(validation[0])} validation examples")
        serving = ExportSignatures(model, seq_len, pair=pair)
        build_report(work, manifest, serving, validation[0], validation[1], repeats=repeats, log=_log)
        with open(os.path.join(work, "report.md"), encoding="utf-8") as f:
            print(f.read())

    return finish


def run(args):
    import keras_bert_impl as kb

    formats, quantizations, learned = check_flags(args)
    if set(formats) & set(HUB_FORMATS):
        return export_hub_folder(formats[0], args)
    model, model_path, stored, task, pair, seq_len = load_for_export(args.model, args.seq_len, args.pair)
    if isinstance(model, kb.QuantizationAwareClassifier) != learned:  # its archive could not be read ahead
        refuse_unused_flags(args, formats, quantizations, not learned)
    float_model = model.classifier if isinstance(model, kb.QuantizationAwareClassifier) else model
    settings = task_data.data_settings(args, task, stored) if task in task_data.TASKS else {}
    read = functools.partial(_examples, task=task, model=model, settings=settings, on_error=args.on_error)
    validation = read(args.validation, "--validation") if args.validation else None
    calibration = _calibration(args, stored, formats, quantizations, float_model is not model, read)
    static_lengths = _static_lengths(args.static_lengths, quantizations, formats, model)
    pair = pair and task == "pair"
    _log(f"{type(model).__name__} ({task}) from {model_path}, sequence length {seq_len}, formats {formats}")
    manifest = write_export(
        model,
        args.output,
        name=args.name,
        seq_len=seq_len,
        pair=pair,
        formats=formats,
        quantizations=quantizations,
        calibration=calibration,
        static_lengths=static_lengths,
        overwrite=args.overwrite,
        finish=_report_writer(validation, float_model, seq_len, pair, args.repeats),
    )
    _log(f"wrote {args.output}: {', '.join(sorted(manifest['files']))}")
    return 0
