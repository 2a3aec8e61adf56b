"""`--runner` and `--workers`, shared by the commands that also run on Apache Beam
(pretrain-data, predict --file, embed); argparse only, so `kbert --help` imports no Beam."""

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_flags, positive_int

LOCAL = "local"


# (flag, add_argument keywords) of every command that runs on Beam.
_RUNNER_FLAGS = (
    (
        "--runner",
        dict(
            default=LOCAL,
            metavar="NAME",
            help="local (default): this one process, as always. direct: Apache Beam's DirectRunner on this "
            "machine (--workers N processes). dataflow, flink, spark, portable, or any Beam runner's class "
            "name: that runner, with its own pipeline options after the command's (e.g. --project=P "
            "--region=R --temp_location=gs://B/tmp for dataflow); see docs/beam.md.",
        ),
    ),
    (
        "--workers",
        dict(
            type=positive_int,
            default=None,
            metavar="N",
            help="With --runner direct: worker processes (default 1). With dataflow: the most workers.",
        ),
    ),
)
# ... and of those that write shards; --output and --overwrite unless the command has its own.
_SHARD_FLAGS = (
    (
        "--lines-per-shard",
        dict(
            type=positive_int,
            default=None,
            metavar="N",
            help="With a Beam runner: input lines per task and per output shard (default 10000).",
        ),
    ),
    (
        "--output",
        dict(
            default=None,
            metavar="DIR",
            help="With a Beam runner: the folder of output shards and manifest.json.",
        ),
    ),
    (
        "--overwrite",
        dict(action="store_true", help="With a Beam runner: replace the shards already in --output."),
    ),
)


def add_runner_flags(parser, shards=False):
    """Adds --runner and --workers (and with `shards`, --lines-per-shard and, unless the
    command has one, --output and --overwrite); the command then also takes the chosen
    runner's own options (cli.main hands whatever it does not know to the runner as
    `args.pipeline_args`)."""
    add_flags(parser, _RUNNER_FLAGS)
    if shards:
        known = {option for action in parser._actions for option in action.option_strings}
        add_flags(parser, [(flag, keywords) for flag, keywords in _SHARD_FLAGS if flag not in known])
    parser.set_defaults(pipeline_args=[], takes_pipeline_args=True)


def check_runner_flags(args):
    """Refuses --workers (or --lines-per-shard) without a runner and a count below 1 (cli.main
    refuses unknown options on the local path, as argparse always did)."""
    if args.runner == LOCAL:
        if getattr(args, "lines_per_shard", None) is not None:
            raise UsageError("--lines-per-shard needs a Beam runner (--runner direct, dataflow, ...).")
        if args.workers is not None:
            raise UsageError(
                f"--workers needs a Beam runner (--runner direct, dataflow, ...). Received: --workers "
                f"{args.workers} with --runner local"
            )


def beam_options(args):
    """The Beam PipelineOptions of --runner, --workers and the pass-through options."""
    from keras_bert_impl.pipelines import pipeline_options

    try:
        return pipeline_options(args.runner, args.workers, args.pipeline_args)
    except ValueError as e:
        raise UsageError(str(e)) from None
