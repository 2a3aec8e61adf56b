"""The `kbert` command: one subcommand per module of `keras_bert_impl.commands`."""

import argparse
import os
import signal
import sys
import threading

from keras_bert_impl.commands.errors import Terminated, UsageError
from keras_bert_impl.commands.flag_types import FlagValueError
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
    serve,
    vocab,
    word_senses,
)

# In the order `kbert --help` lists them: the pipeline from a checkpoint to predictions, then
# the commands that look inside a model.
COMMANDS = (
    convert,
    vocab,
    pretrain_data,
    pretrain,
    finetune,
    distill,
    evaluate,
    predict,
    export,
    serve,
    attention,
    embed,
    index,
    search,
    plot_embeddings,
    word_senses,
)


class _Parser(argparse.ArgumentParser):
    """allow_abbrev=False, and a value a `flag_types` type refused raised as one UsageError line
    (argparse would print its usage first), so every bad number reads the same, checked at
    parse time or after."""

    def __init__(self, *args, **kwargs):
        # With argparse's default a prefix of a flag is that flag (`kbert predict --text`
        # silently meant --text-b); here it is an error, exit 2.
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        # Called by parse_known_args while it handles the ArgumentError of a type's refusal.
        refused = sys.exc_info()[1]
        if isinstance(refused, argparse.ArgumentError) and isinstance(refused.__context__, FlagValueError):
            raise UsageError(f"{self.prog}: {refused.argument_name} {refused.__context__}") from None
        super().error(message)


def build_parser():
    parser = _Parser(prog="kbert", description="keras_bert_impl: BERT as Keras 3 layers.")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="Show the Python traceback of a failure instead of its one-line message (or set KBERT_DEBUG=1).",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def _expected_failures():
    """What a user's input can cause, as opposed to a bug: one line, exit status 2."""
    from keras_bert_impl.checkpoints import CheckpointMismatchError
    from keras_bert_impl.data.readers import MalformedRowError
    from keras_bert_impl.training import BackupError

    # FloatingPointError: a run whose loss became NaN or inf (training.DivergenceGuard).
    return (
        UsageError,
        MalformedRowError,
        CheckpointMismatchError,
        BackupError,
        OSError,
        UnicodeDecodeError,
        FloatingPointError,
    )


def _interrupted_message(args):
    output = getattr(args, "output", None)
    if isinstance(output, str) and os.path.isdir(os.path.join(output, "backup")):
        return (
            f". The training state of the last backup is in {os.path.join(output, 'backup')}: "
            "run the same command again to resume from there."
        )
    return ". Every file is written whole or not at all: run the same command again."


# The stop signal (SIGTERM or SIGINT) that `main`'s command received, or None.
_received = None


def _stopped(args, terminated):
    """Says in one line that the command was stopped and what was kept; the exit status, 2."""
    what = "terminated (SIGTERM)" if terminated else "interrupted"
    print(f"kbert {args.command}: {what}{_interrupted_message(args)}", file=sys.stderr)
    return 2


def _raise_stop(signum, frame):
    global _received
    if _inside_finalizer(frame):
        # Python prints and drops an exception raised in a __del__ (TensorFlow's functions free
        # themselves there, often mid-trace), so a SIGTERM handled there was lost and the command
        # ran on to exit 0. It is sent again once the finalizer has returned.
        threading.Timer(0.01, os.kill, (os.getpid(), signum)).start()
        return
    _received = signum
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _inside_finalizer(frame):
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _terminate_as_interrupt():
    """SIGTERM (`kill`, systemd, a container's stop) takes Ctrl-C's path: its default action
    ends the process at once, leaving the temporary folders Ctrl-C's cleanup removes (the TFLite
    converter's SavedModel, hundreds of MB). Ctrl-C keeps Python's KeyboardInterrupt, raised by
    the same handler so that `main` knows which signal stopped the command. A signal ignored or
    handled by someone else at start stays so. Returns {signal: handler to put back when `main`
    returns}, as `main` also runs in-process."""
    global _received
    _received = None
    if threading.current_thread() is not threading.main_thread():
        return {}
    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    return {
        number: signal.signal(number, _raise_stop)
        for number, default in defaults.items()
        if signal.getsignal(number) == default
    }


def main(argv=None):
    """Runs `kbert` with `argv` (default: the process's arguments); returns the exit status.

    Every expected failure (a bad flag, file or model, an interrupted run) is one line on
    stderr naming the input and the fix, exit status 2; `--debug` or KBERT_DEBUG=1 re-raises
    it with its traceback. Anything else is a bug and keeps its traceback. SIGTERM is Ctrl-C:
    the same cleanup, line and status.
    """
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
    except UsageError as e:  # a flag's value, refused while parsing (_Parser.error)
        print(e, file=sys.stderr)
        return 2
    if unknown:
        # Only a command run on a Beam runner takes options it does not know: that runner's own.
        if not getattr(args, "takes_pipeline_args", False) or args.runner == "local":
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.pipeline_args = unknown
    debug = args.debug or os.environ.get("KBERT_DEBUG", "") not in ("", "0")
    previous = _terminate_as_interrupt()
    try:
        # What `import keras_bert_impl` does outside the `kbert` command (TensorFlow, and every layer,
        # model, optimizer and schedule registered with Keras for load_model), once a command is to run;
        # not for one that runs without them (`kbert predict` of an export folder, on LiteRT).
        if not getattr(args, "without_tensorflow", lambda _: False)(args):
            import keras_bert_impl.layers  # noqa: F401
            import keras_bert_impl.models  # noqa: F401
            import keras_bert_impl.training  # noqa: F401  (create_optimizer's optimizer and schedule)

        return args.func(args)
    except KeyboardInterrupt as e:
        if debug:
            raise
        return _stopped(args, isinstance(e, Terminated))
    except BrokenPipeError:
        # `kbert predict ... | head`: the reader left; not an error of ours.
        sys.stderr.close()
        return 0
    except Exception as e:
        if _received is not None and not debug:
            # The signal's exception, raised inside a library's own handling (TensorFlow's
            # pybind11 layer, a tracer's `except`), came out as another exception; the command
            # was still stopped by the user, and its `finally` blocks ran.
            return _stopped(args, _received == signal.SIGTERM)
        if debug or not isinstance(e, _expected_failures()):
            raise
        message = " ".join(str(e).split()) or type(e).__name__
        print(f"kbert {args.command}: {message}", file=sys.stderr)
        return 2
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


if __name__ == "__main__":
    sys.exit(main())
