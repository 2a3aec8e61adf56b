"""`--runner` and `--workers`, shared by the commands that also run on Apache Beam
(pretrain-data, predict --file, embed); argparse only, so `kbert --help` imports no Beam."""

from keras_bert_impl.commands.errors import UsageError

LOCAL = "local"


def add_runner_flags(parser, shards=False):
    """Adds --runner and --workers (and with `shards`, --lines-per-shard and, unless the
    command has one, --output and --overwrite); the command then also takes the chosen
    runner's own options (cli.main hands whatever it does not know to the runner as
    `args.pipeline_args`)."""
    parser.add_argument(
        "--runner",
        default=LOCAL,
        metavar="NAME",
        help="local (default): this one process, as always. direct: Apache Beam's DirectRunner on this machine "
        "(--workers N processes). dataflow, flink, spark, portable, or any Beam runner's class name: that runner, "
        "with its own pipeline options after the command's (e.g. --project=P --region=R --temp_location=gs://B/tmp "
        "for dataflow); see docs/beam.md.",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="With --runner direct: worker processes (default 1). With dataflow: the most workers.",
    )
    if shards:
        parser.add_argument(
            "--lines-per-shard",
            type=int,
            default=None,
            metavar="N",
            help="With a Beam runner: input lines per task and per output shard (default 10000).",
        )
        known = {option for action in parser._actions for option in action.option_strings}
        if "--output" not in known:
            parser.add_argument(
                "--output",
                default=None,
                metavar="DIR",
                help="With a Beam runner: the folder of output shards and manifest.json.",
            )
        if "--overwrite" not in known:
            parser.add_argument(
                "--overwrite",
                action="store_true",
                help="With a Beam runner: replace the shards already in --output.",
            )
    parser.set_defaults(pipeline_args=[], takes_pipeline_args=True)


def check_runner_flags(args):
    """Refuses --workers (or --lines-per-shard) without a runner and a count below 1 (cli.main
    refuses unknown options on the local path, as argparse always did)."""
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1. Received: --workers {args.workers}")
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
