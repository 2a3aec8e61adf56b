"""The `kbert` command: one subcommand per module of `keras_bert_impl.commands`."""

import argparse
import sys

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands import (
    attention,
    convert,
    distill,
    embed,
    evaluate,
    export,
    finetune,
    index,
    plot_embeddings,
    predict,
    pretrain,
    pretrain_data,
    search,
    vocab,
    word_senses,
)

# In the order `kbert --help` lists them: the pipeline from a checkpoint to predictions, then
# the commands that look inside a model.
COMMANDS = (convert, vocab, pretrain_data, pretrain, finetune, distill, evaluate, predict, export,
            attention, embed, index, search, plot_embeddings, word_senses)


def build_parser():
    parser = argparse.ArgumentParser(prog="kbert", description="keras_bert_impl: BERT as Keras 3 layers.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv=None):
    """Runs `kbert` with `argv` (default: the process's arguments); returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as e:
        # A flag or input that cannot work: one line naming it, exit status 2.
        print(f"kbert {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
