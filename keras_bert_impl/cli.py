"""The `kbert` command."""

import argparse
import os
import sys



def _convert(args):
    from keras_bert_impl.checkpoints import CheckpointMismatchError, convert_checkpoint

    if not args.output.endswith(".keras"):
        raise SystemExit(f"--output must end in .keras. Received: {args.output!r}")
    if not os.path.isdir(args.src):
        raise SystemExit(f"SRC must be a checkpoint folder. Received: {args.src!r} (not a directory)")
    try:
        model, report = convert_checkpoint(
            args.src, args.format, with_heads=False if args.backbone_only else None, allow_pickle=args.allow_pickle
        )
    except (CheckpointMismatchError, ValueError, FileNotFoundError) as e:
        print(f"kbert convert: {e}", file=sys.stderr)
        return 1
    print(report.summary(verbose=args.verbose))
    if args.report_json:
        with open(args.report_json, "w", encoding="utf-8") as f:
            f.write(report.to_json())
    from keras_bert_impl.commands.training_setup import atomic_save

    atomic_save(model, args.output)
    backbone = getattr(model, "backbone", model)
    vocab = f"{len(backbone.vocabulary)} tokens, {'uncased' if backbone.lowercase else 'cased'}" if backbone.vocabulary else "none"
    print(f"Wrote {type(model).__name__} to {args.output} (vocabulary: {vocab})")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="kbert", description="keras_bert_impl: BERT as Keras 3 layers.")
    sub = parser.add_subparsers(dest="command", required=True)
    convert = sub.add_parser(
        "convert",
        help="Convert a checkpoint to a .keras model (with its vocabulary and casing).",
        description="Import a BERT checkpoint, print a per-tensor report, and save a .keras model that "
        "carries the checkpoint's WordPiece vocabulary and casing. Nothing is half-loaded: if any tensor "
        "is missing or has the wrong shape, nothing is written and the tensors are named.",
    )
    convert.add_argument(
        "src",
        help="Checkpoint folder. google: bert_config.json, bert_model.ckpt.*, vocab.txt. huggingface: "
        "config.json, model.safetensors, vocab.txt. model-garden: encoder_config.json (BertEncoderV2 "
        "get_config() as JSON) and a TF2 checkpoint of tf.train.Checkpoint(encoder=...), optional vocab.txt.",
    )
    convert.add_argument("--format", required=True, choices=["google", "huggingface", "model-garden"], help="Checkpoint format of SRC.")
    convert.add_argument("--output", required=True, help="Path of the .keras file to write.")
    convert.add_argument("--backbone-only", action="store_true", help="Ignore MLM/NSP heads even when the checkpoint has them.")
    convert.add_argument(
        "--allow-pickle", action="store_true",
        help="huggingface: read pytorch_model.bin when there is no safetensors file. Unpickling can run code "
        "from the file: only for sources you trust. Needs torch.",
    )
    convert.add_argument("--report-json", help="Also write the per-tensor report as JSON to this path.")
    convert.add_argument("--verbose", action="store_true", help="List every mapped tensor.")
    convert.set_defaults(func=_convert)

    from keras_bert_impl.commands import evaluate, finetune, predict, pretrain, pretrain_data, vocab

    vocab.add_parser(sub)
    pretrain_data.add_parser(sub)
    pretrain.add_parser(sub)
    finetune.add_parser(sub)
    evaluate.add_parser(sub)
    predict.add_parser(sub)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
