"""The rule every `kbert` writer follows for the files it creates: an existing file is
replaced only when the user says so (`--overwrite`)."""

import os

from keras_bert_impl.commands.errors import UsageError


def add_overwrite_flag(parser, what="the output file"):
    parser.add_argument("--overwrite", action="store_true", help=f"Replace {what} when it exists (refused otherwise).")


def refuse_existing(args, *flags):
    """UsageError when the file of any of `flags` (argparse dests, e.g. "output") exists and
    --overwrite was not given."""
    for dest in flags:
        path = getattr(args, dest, None)
        if path and os.path.exists(path) and not getattr(args, "overwrite", False):
            raise UsageError(f"--{dest.replace('_', '-')} {path} already exists: add --overwrite to replace it, or give "
                             "another path.")
