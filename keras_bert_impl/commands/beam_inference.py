"""`kbert predict --file` and `kbert embed` with --runner: the pipeline of
keras_bert_impl.pipelines.InferencePipeline, fed the same model the one-process commands build."""

import functools
import sys

from keras_bert_impl import file_paths
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.runner_flags import beam_options, check_runner_flags
from keras_bert_impl.commands.text_lines import read_lines

DEFAULT_LINES_PER_SHARD = 10000  # --lines-per-shard's help says so
# A --file / FILE pattern: a literal name may hold glob characters (a "&" or "[").
_GLOB = ("*", "?", "[")


def run_predict(args):
    """`kbert predict --file PATTERN --runner R --output DIR`: JSON lines per shard, the rows
    `kbert predict --file ... --json` prints, for every head it predicts."""
    from keras_bert_impl.commands.inference_setup import load_for_inference
    from keras_bert_impl.commands.predict_rows import RowPredictor, blank_row

    check_runner_flags(args)
    options = beam_options(args)  # first: remote paths are read with its options
    if not args.file or args.texts or args.text_b or args.question or args.context:
        raise UsageError(
            f"--runner {args.runner} predicts on --file only (a file or a glob of files; pair and squad "
            "models take a JSON object per line), not on TEXT, --text-b, --question or --context."
        )
    output = _check_output(args)
    # Loaded here once, so a missing or unusable model is one line before any worker starts, and
    # every line is read as the workers will read it (a bad one refused here, not on a worker).
    setup = load_for_inference(file_paths.with_local_model(args), has_text_b=False)
    check = RowPredictor(setup, args.batch_size, args.threshold).check_file
    shards = _shards(args.file, "--file", args, check)
    predictor = functools.partial(_Predictor, args)
    return _run(args, options, shards, predictor, output, "predictions", blank_row(setup.task))


def run_embed(args):
    """`kbert embed PATTERN --runner R --output DIR`: .npy shards of vectors."""
    from keras_bert_impl.commands.encoder_flags import encoder_from_args

    check_runner_flags(args)
    options = beam_options(args)  # first: remote paths are read with its options
    output = _check_output(args)
    shards = _shards(args.file, "FILE", args)
    encoder_from_args(file_paths.with_local_model(args))  # checks the model and flags here, before any worker
    return _run(args, options, shards, functools.partial(_Encoder, args), output, "embeddings", None)


def _run(args, options, shards, load, output, kind, blank_row):
    from keras_bert_impl.pipelines import InferencePipeline

    pipeline = InferencePipeline(
        shards, read_lines, load, output, kind, blank_row=blank_row, settings=_settings(args)
    )
    manifest = pipeline.run(options)
    lines = sum(s.lines for s in shards)
    resumed = f"; {pipeline.resumed} finished by an earlier run were kept" if pipeline.resumed else ""
    print(
        f"Wrote {kind} of {lines} lines in {len(shards)} shard(s) to {output} with --runner {args.runner} "
        f"({file_paths.basename(manifest)} lists them{resumed})",
        file=sys.stderr,
    )
    return 0


def _settings(args):
    """The flags that decide the outputs, and the model file's identity: what a re-run must
    share to resume a failed run's finished shards."""
    settings = {
        k: v
        for k, v in vars(args).items()
        if isinstance(v, (str, int, float, bool, list, type(None)))
        and k not in ("workers", "pipeline_args", "overwrite", "output")
    }
    model = file_paths.absolute(args.model)
    for path in (model, file_paths.join(model, "model.keras")):
        stamp = file_paths.stamp(path)
        if stamp is not None:
            settings["model_file"] = [path, *stamp]
    return settings


def _check_output(args):
    output = args.output
    if output is None:
        raise UsageError(f"--runner {args.runner} writes a folder of shards: give it with --output DIR.")
    if file_paths.exists(output) and not file_paths.is_folder(output):
        raise UsageError(f"--output {output!r} is a file: with --runner, --output is a folder of shards.")
    if file_paths.exists(file_paths.join(output, "manifest.json")) and not args.overwrite:
        raise UsageError(
            f"--output {output!r} already holds shards (manifest.json): choose a new folder, or add "
            "--overwrite."
        )
    return output


def _shards(pattern, flag, args, count=None):
    """The TextShards of every file `pattern` names, each file counted and checked to be UTF-8
    text here (and by `count(lines, name)`, which returns the count), so a bad input is one line
    before any worker starts."""
    from keras_bert_impl.pipelines import text_shards

    lines_per_shard = DEFAULT_LINES_PER_SHARD if args.lines_per_shard is None else args.lines_per_shard
    paths = file_paths.expand(pattern) if any(c in pattern for c in _GLOB) else [pattern]
    if not paths:
        raise UsageError(f"{flag} {pattern!r} matches no file.")
    counts = []
    for path in paths:
        if file_paths.is_folder(path) or not file_paths.exists(path):
            raise UsageError(f"{flag} {path!r}: no such file.")
        try:
            lines = read_lines(path, flag)
            counts.append((path, count(lines, f"{flag} {path}") if count else sum(1 for _ in lines)))
        except OSError as e:
            raise UsageError(f"{flag} {path!r} cannot be read ({e.strerror or e}).") from None
    if not sum(count for _, count in counts):
        raise UsageError(f"{flag} {pattern!r} has no lines.")
    return text_shards(counts, lines_per_shard)


class _Predictor:
    """On a worker: `kbert predict`'s model and RowPredictor for the same flags; `infer` gives
    the JSON row `kbert predict --json` prints for each --file line."""

    def __init__(self, args):
        from keras_bert_impl.commands.inference_setup import load_for_inference
        from keras_bert_impl.commands.predict_rows import RowPredictor

        setup = load_for_inference(file_paths.with_local_model(args), has_text_b=False)
        self.task, self.predictor = setup.task, RowPredictor(setup, args.batch_size, args.threshold)

    def infer(self, lines):
        from keras_bert_impl.commands.predict_rows import file_row

        # The launcher read every line the same way (check_file), so none is refused here.
        return self.predictor.rows([file_row(self.task, line, "--file") for line in lines])


class _Encoder:
    """On a worker: `kbert embed`'s SentenceEncoder for the same flags."""

    def __init__(self, args):
        from keras_bert_impl.commands.encoder_flags import encoder_from_args

        self.encoder, _ = encoder_from_args(file_paths.with_local_model(args))

    def infer(self, texts):
        return list(self.encoder.encode(texts))
