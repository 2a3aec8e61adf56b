"""argparse types of the commands' flags. A value one of them refuses is `kbert`'s one line,
`kbert CMD: --flag must be ...`, exit 2 (cli.py's parser class turns it into a UsageError), as
a check after parsing would say it; a value that is not a number stays argparse's own error.

argparse only: imported while the parser is built."""

import argparse
import re
import sys


class FlagValueError(argparse.ArgumentTypeError):
    """A number of the right kind out of its flag's range: the message follows the flag's name."""


def positive_int(text):
    """`type=positive_int`: a count or a size, an int >= 1 (0 is refused, never "not given")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise FlagValueError(f"must be a positive integer. Received: {value}")
    return value


def add_old_spelling(parser, old, new, **keywords):
    """`old`, a flag renamed `new`, still taken (hidden from --help) for `new`'s value, with a
    one-line note on stderr naming the new spelling; `keywords` as `new` was added with."""
    parser.add_argument(
        old,
        action=_OldSpelling,
        new=new,
        dest=new.lstrip("-").replace("-", "_"),
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
        **keywords,
    )


class _OldSpelling(argparse.Action):
    def __init__(self, *args, new, **kwargs):
        super().__init__(*args, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, value, option_string=None):
        print(
            f"{parser.prog}: {option_string} is now spelled {self.new}; running with {self.new} {value}.",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, value)


def in_flag_names(message, flags):
    """`message` of a library class with its argument names replaced by the flags that set them
    (`flags`: {argument name: flag})."""
    for argument, flag in flags.items():
        message = re.sub(rf"\b{argument}\b", flag, message)
    return message


def add_flags(parser, table):
    """Adds each `(flag, add_argument keywords)` of `table` to `parser`, in order (`flag`: one
    name, or a tuple of names)."""
    for flag, keywords in table:
        parser.add_argument(*((flag,) if isinstance(flag, str) else flag), **keywords)


def add_command(subparsers, name, run, help, description, flags=()):
    """`kbert NAME`'s parser on `subparsers`: `run`, the function that runs it; `help`, its line in
    `kbert --help`; its `description`; the flags of `flags` (`add_flags`' table). Returns the
    parser, for the flags added after the table."""
    parser = subparsers.add_parser(name, help=help, description=description)
    add_flags(parser, flags)
    parser.set_defaults(func=run)
    return parser
