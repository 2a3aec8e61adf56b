"""The rule every `kbert` writer follows for the files it creates: an existing file is
replaced only when the user says so (`--overwrite`)."""

import os

from keras_bert_impl.commands.errors import UsageError


def overwrite_flag(what="the output file"):
    """`--overwrite` as a row of a flag table (`flag_types.add_flags`): `what` it replaces."""
    return (
        "--overwrite",
        dict(action="store_true", help=f"Replace {what} when it exists (refused otherwise)."),
    )


def add_overwrite_flag(parser, what="the output file"):
    flag, keywords = overwrite_flag(what)
    parser.add_argument(flag, **keywords)


def refuse_existing(args, *flags):
    """UsageError when the file of any of `flags` (argparse dests, e.g. "output") exists and
    --overwrite was not given."""
    for dest in flags:
        path = getattr(args, dest, None)
        if path and os.path.exists(path) and not getattr(args, "overwrite", False):
            raise UsageError(
                f"--{dest.replace('_', '-')} {path} already exists: add --overwrite to replace it, or give "
                "another path."
            )


def refuse_replacing_inputs(output_flag, output, inputs):
    """UsageError when the folder `output` (which --overwrite replaces whole) is, or holds, one
    of `inputs` ({flag: path}, None skipped): replacing it would delete what this very command
    reads, a run's model among them. Links are followed, so a symlinked path is caught too."""
    if not output:
        return
    out = os.path.realpath(output)
    for flag, path in inputs.items():
        if not path:
            continue
        real = os.path.realpath(path)
        if real == out or real.startswith(out.rstrip(os.sep) + os.sep):
            raise UsageError(
                f"{output_flag} {output} holds {flag} {path}: writing there replaces the whole folder, and "
                f"with it what this command reads. Give another {output_flag}, outside that folder."
            )
