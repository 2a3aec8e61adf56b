"""`kbert convert`: a checkpoint folder -> a .keras model with its vocabulary and casing."""

import os
import sys

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command


_HELP = "Convert a checkpoint to a .keras model (with its vocabulary and casing)."
_DESCRIPTION = (
    "Import a BERT checkpoint, print a per-tensor report, and save a .keras model that "
    "carries the checkpoint's WordPiece vocabulary and casing. Nothing is half-loaded: if any tensor "
    "is missing or has the wrong shape, nothing is written and the tensors are named."
)
# (flag, add_argument keywords), in `--help`'s order.
_FLAG_TABLE = (
    (
        "src",
        dict(
            help="Checkpoint folder. google: bert_config.json, bert_model.ckpt.*, vocab.txt. huggingface: "
            "config.json, model.safetensors, vocab.txt (or tokenizer.json). model-garden: "
            "encoder_config.json (BertEncoderV2 get_config() as JSON) or a TF2 release's bert_config.json, "
            "a TF2 checkpoint of tf.train.Checkpoint(encoder=...) or (model=...), optional vocab.txt."
        ),
    ),
    (
        "--format",
        dict(
            required=True, choices=["google", "huggingface", "model-garden"], help="Checkpoint format of SRC."
        ),
    ),
    (
        "--output",
        dict(
            required=True,
            help="Path of the .keras file to write; an existing file is refused (see --overwrite).",
        ),
    ),
    ("--overwrite", dict(action="store_true", help="Replace an existing --output (and --report-json) file.")),
    (
        "--backbone-only",
        dict(action="store_true", help="Ignore MLM/NSP heads even when the checkpoint has them."),
    ),
    (
        "--allow-pickle",
        dict(
            action="store_true",
            help="huggingface: read pytorch_model.bin when there is no safetensors file. Unpickling can run "
            "code from the file: only for sources you trust. Needs torch.",
        ),
    ),
    (
        "--report-json",
        dict(
            help="Also write the per-tensor report as JSON to this path (not --output's; "
            "an existing file is refused, see --overwrite)."
        ),
    ),
    ("--verbose", dict(action="store_true", help="List every mapped tensor.")),
)


def add_parser(subparsers):
    return add_command(subparsers, "convert", run, _HELP, _DESCRIPTION, _FLAG_TABLE)


def _check_flags(args):
    if not args.output.endswith(".keras"):
        raise UsageError(f"--output must end in .keras. Received: {args.output!r}")
    if not os.path.isdir(args.src):
        raise UsageError(f"SRC must be a checkpoint folder. Received: {args.src!r} (not a directory)")
    if args.allow_pickle and args.format != "huggingface":
        raise UsageError(
            f"--allow-pickle reads Hugging Face's pytorch_model.bin: it does nothing with --format "
            f"{args.format}. Drop it."
        )
    if args.report_json and os.path.abspath(args.report_json) == os.path.abspath(args.output):
        raise UsageError(
            f"--report-json {args.report_json} is the --output path: give the report its own file."
        )
    for flag, path in (("--output", args.output), ("--report-json", args.report_json)):
        if path and os.path.exists(path) and not args.overwrite:
            raise UsageError(
                f"{flag} {path} already exists: add --overwrite to replace it, or give another path."
            )


def run(args):
    _check_flags(args)

    from keras_bert_impl.atomic_write import write_text_atomically
    from keras_bert_impl.checkpoints import CheckpointMismatchError, convert_checkpoint
    from keras_bert_impl.training import save_model

    try:
        model, report = convert_checkpoint(
            args.src,
            args.format,
            with_heads=False if args.backbone_only else None,
            allow_pickle=args.allow_pickle,
        )
    except (
        CheckpointMismatchError,
        ValueError,
        FileNotFoundError,
        ImportError,
    ) as e:  # ImportError: no torch
        print(
            f"kbert convert: {' '.join(str(e).split())}", file=sys.stderr
        )  # one line, as every kbert failure
        return 2
    print(report.summary(verbose=args.verbose))
    save_model(model, args.output)
    if args.report_json:  # after the model: a report is there only for a model that is
        write_text_atomically(report.to_json(), args.report_json)
    backbone = getattr(model, "backbone", model)
    vocab = (
        f"{len(backbone.vocabulary)} tokens, {'uncased' if backbone.lowercase else 'cased'}"
        if backbone.vocabulary
        else "none"
    )
    print(f"Wrote {type(model).__name__} to {args.output} (vocabulary: {vocab})")
    return 0
