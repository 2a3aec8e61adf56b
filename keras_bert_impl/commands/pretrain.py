"""`kbert pretrain`: BERT pretraining (masked LM + next-sentence prediction), resumable."""

import dataclasses
import functools
import json
import math
import os
import sys
import time

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command, positive_int
from keras_bert_impl.commands.training_flags import (
    add_flags,
    add_run_folder_flags,
    add_training_flags,
    check_training_flags,
    compile_for_training,
    spec_options,
    train,
)


_HELP = "Pretrain a BertPretrainer (MLM + NSP) from text or pretraining TFRecords."
DESCRIPTION = (
    "Pretrain BERT's masked LM and next-sentence heads. From --corpus, the examples are first built as "
    "`kbert pretrain-data` does (Google's recipe: 15% masking, 80/10/10, NSP pairs) into OUTPUT/records, "
    "once; from --records, the TFRecords of `kbert pretrain-data` (or Google's create_pretraining_data.py) "
    "are read as they are. Writes OUTPUT/model.keras (the BertPretrainer with its vocabulary: `kbert "
    "finetune --init OUTPUT` starts from it), OUTPUT/metrics.json (MLM and NSP accuracy, and the unigram "
    "baseline: the accuracy of always predicting the most frequent masked token) and TensorBoard logs. Backs "
    "up the full state every --save-every steps; the same command resumes a killed run at the exact step."
)
SOURCE_FLAGS = (
    ("--corpus", dict(nargs="+", metavar="FILE", help="Text files (see --corpus-format).")),
    ("--records", dict(metavar="DIR", help="Folder of pretraining TFRecords with its pretraining.json.")),
)
MODEL_FLAGS = (
    ("--preset", dict(default=None, help="Architecture of a new model, e.g. bert_tiny (random init).")),
    ("--init", dict(default=None, help="Continue from a model (.keras, run folder or checkpoint folder).")),
)
FLAGS = (
    (
        "--corpus-format",
        dict(
            default="text",
            choices=["text", "reviews-csv"],
            help="text: one sentence per line, blank line between documents; reviews-csv: a document "
            'per CSV row ("label","text"). Default text.',
        ),
    ),
    (
        "--vocab",
        dict(required=True, help="WordPiece vocab.txt; its size sets the embedding size of a new model."),
    ),
    (
        "--output",
        dict(
            required=True,
            help="Run folder (created). The same command again resumes an unfinished "
            "run and leaves a finished one as it is; other settings or edited inputs are refused.",
        ),
    ),
    ("--steps", dict(type=positive_int, default=10000, help="Optimizer steps in all. Default 10000.")),
    (
        "--steps-per-epoch",
        dict(
            type=positive_int,
            default=None,
            help="Steps between progress summaries, validation and epoch-end backups. Default "
            "min(--steps, 1000).",
        ),
    ),
    (
        "--max-predictions",
        dict(type=int, default=20, help="--corpus: masked positions per sequence. Default 20."),
    ),
    (
        "--dupe-factor",
        dict(type=int, default=5, help="--corpus: passes over the text, new masks each. Default 5."),
    ),
    (
        "--validation-records",
        dict(
            metavar="DIR",
            default=None,
            help="Held-out pretraining TFRecords: MLM/NSP accuracy on them at each epoch end.",
        ),
    ),
    (
        "--validation-steps",
        dict(
            type=positive_int, default=50, help="Batches of --validation-records per evaluation. Default 50."
        ),
    ),
)


def add_parser(subparsers):
    parser = add_command(subparsers, "pretrain", run, _HELP, DESCRIPTION)
    add_flags(parser.add_mutually_exclusive_group(required=True), SOURCE_FLAGS)
    add_flags(parser.add_mutually_exclusive_group(), MODEL_FLAGS)
    add_flags(parser, FLAGS)
    add_run_folder_flags(parser)
    add_training_flags(parser, default_learning_rate=1e-4)
    return parser


def run(args):
    # A UsageError goes up to cli.main: one line and status 2, or its traceback with --debug.
    from keras_bert_impl.training import TrainingSpec

    steps_per_epoch = _check_flags(args)
    inputs = ("corpus", "records", "vocab", "init", "validation_records")
    result = train(
        TrainingSpec(
            **spec_options(args, "pretrain", inputs),
            data=functools.partial(_data, args, steps_per_epoch),
            model=functools.partial(_model, args),
            final_metrics=functools.partial(_final_metrics, args),
        )
    )
    if result is not None:
        _report(result.metrics["final_epoch"], result.data.baseline)
        print(
            f"Wrote {args.output}/model.keras (BertPretrainer, {len(result.data.start.vocabulary)}-token "
            "vocabulary)"
        )
    return 0


def _records(args, vocabulary, run):
    """The records folder: --records, or OUTPUT/records built once from --corpus."""
    from keras_bert_impl.data import PretrainingExampleBuilder

    if args.records:
        if not os.path.isfile(os.path.join(args.records, "pretraining.json")):
            raise UsageError(
                f"--records {args.records}: no pretraining.json there; make the records with kbert "
                "pretrain-data."
            )
        return args.records
    directory = run.output_path("records")  # a replaced run's records go first
    builder = PretrainingExampleBuilder(
        vocabulary,
        max_seq_length=args.seq_len,
        max_predictions_per_seq=args.max_predictions,
        dupe_factor=args.dupe_factor,
        seed=args.seed,
    )
    metadata_path = os.path.join(directory, "pretraining.json")
    if os.path.isfile(metadata_path):
        with open(metadata_path, encoding="utf-8") as f:
            stored = json.load(f)
        wanted = builder.metadata()
        differ = {k: (stored.get(k), v) for k, v in wanted.items() if stored.get(k) != v}
        if differ:
            raise UsageError(
                f"{directory} holds records made with other settings ({differ}): resume with those, or use a "
                "new --output."
            )
        return directory
    _build_records(args, builder, directory)
    return directory


def _build_records(args, builder, directory):
    from keras_bert_impl.data import PretrainingCorpus

    try:
        corpus = PretrainingCorpus(args.corpus, format=args.corpus_format)
        documents, _ = corpus.scan()
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(f"--corpus: {e}") from None
    if documents == 0:
        raise UsageError(
            f"--corpus {args.corpus} has no text (0 documents with --corpus-format {args.corpus_format})."
        )
    started = time.monotonic()
    # The run's own folder without its pretraining.json: whatever shards are there are a killed
    # build's (the metadata goes in last), so they are replaced, not refused.
    writer = builder.write(corpus, directory, overwrite=True)
    print(
        f"kbert pretrain: built {writer.count} examples from {documents} documents in "
        f"{time.monotonic() - started:.0f} s into {directory}",
        file=sys.stderr,
    )


def _check_flags(args):
    check_training_flags(args)
    steps_per_epoch = args.steps_per_epoch or min(args.steps, 1000)
    if args.steps % steps_per_epoch:
        raise UsageError(
            f"--steps {args.steps} must be a multiple of --steps-per-epoch {steps_per_epoch} (each epoch is "
            "that many steps)."
        )
    if not os.path.isfile(args.vocab):
        raise UsageError(f"--vocab {args.vocab!r}: no such file.")
    if args.init is None and args.preset is None:
        raise UsageError(
            "Give --preset NAME for a new model (e.g. bert_tiny) or --init MODEL to continue one."
        )
    return steps_per_epoch


@dataclasses.dataclass(frozen=True)
class _Start:
    """The model a run starts from: --init's (`init`, `backbone`) or a --preset's (both None)."""

    init: object
    backbone: object
    source: str
    vocabulary: list
    lowercase: bool
    max_len: int


def _starting_point(args):
    """The --init model or the --preset, the vocabulary, and the longest sequence the model takes."""
    import keras_bert_impl as kb
    from keras_bert_impl.commands import model_files
    from keras_bert_impl.tokenization.vocabulary import read_vocabulary, vocabulary_is_uncased

    if args.init:
        init, source = model_files.load_init(args.init)
        backbone = model_files.backbone_of(init)
        vocabulary, _ = model_files.vocabulary_for(backbone, args.vocab)
        uncased = backbone.lowercase if backbone.vocabulary is not None else vocabulary_is_uncased(vocabulary)
        start = _Start(init, backbone, source, vocabulary, uncased, backbone.max_sequence_length)
    else:
        if args.preset not in kb.BERT_PRESETS:
            raise UsageError(
                f"--preset {args.preset!r} is not a preset. Choose one of: "
                f"{', '.join(sorted(kb.BERT_PRESETS))}."
            )
        vocabulary = read_vocabulary(args.vocab)
        max_len = kb.BERT_PRESETS[args.preset]["max_sequence_length"]
        start = _Start(
            None,
            None,
            f"preset {args.preset} (random init)",
            vocabulary,
            vocabulary_is_uncased(vocabulary),
            max_len,
        )
    if args.seq_len > start.max_len:
        raise UsageError(f"--seq-len {args.seq_len} exceeds the model's max_sequence_length={start.max_len}.")
    return start


@dataclasses.dataclass(frozen=True, kw_only=True)
class _PretrainData:
    """What `TrainingData` holds, the starting point and the unigram baseline."""

    dataset_fn: object
    epochs: int
    steps_per_epoch: int
    validation: object
    records: str
    start: _Start
    token: int
    baseline: float


def _readers(args, records):
    """The records' reader and --validation-records' (or None)."""
    from keras_bert_impl.data import PretrainingRecordReader

    # The run's own records are rebuilt from --corpus by the same command once removed.
    remedy = (
        {}
        if args.records
        else {
            "remedy": f"Delete {records} and run the same command again: it builds the "
            "records from --corpus anew (the backup, if any, is kept)."
        }
    )
    try:
        reader = PretrainingRecordReader.from_directory(records, **remedy)
        validation = args.validation_records and PretrainingRecordReader.from_directory(
            args.validation_records
        )
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(str(e)) from None
    return reader, validation or None


def _check_records(records, reader, start):
    with open(os.path.join(records, "pretraining.json"), encoding="utf-8") as f:
        records_meta = json.load(f)
    if records_meta.get("vocabulary_size") not in (None, len(start.vocabulary)):
        raise UsageError(
            f"The records in {records} were made with a {records_meta['vocabulary_size']}-token vocabulary, "
            f"--vocab has {len(start.vocabulary)}: make the records with the same vocab.txt."
        )
    if reader.max_seq_length > start.max_len:
        raise UsageError(
            f"The records are {reader.max_seq_length} tokens long; the model takes at most {start.max_len}."
        )
    return records_meta


def _data(args, steps_per_epoch, run):
    """The records (built once from --corpus), checked against the vocabulary and the model."""
    from keras_bert_impl.data import unigram_baseline

    start = _starting_point(args)
    records = _records(args, start.vocabulary, run)
    reader, validation_reader = _readers(args, records)
    records_meta = _check_records(records, reader, start)

    def dataset_fn():
        # Every pass the run can reach (a pass is at least one batch), each ordered and masked from
        # (seed, pass) alone: a resumed run skips to the uninterrupted run's batch.
        return reader.dataset(
            batch_size=args.batch_size, shuffle_buffer_size=10000, seed=args.seed, passes=args.steps
        )

    token, baseline = unigram_baseline(dataset_fn())
    print(
        f"kbert pretrain: {start.source}; records {records} ({records_meta.get('examples')} examples); "
        f"{args.steps} "
        f"steps on {run.strategy.num_replicas_in_sync} replica(s); unigram MLM baseline {baseline:.4f} "
        f"(always {start.vocabulary[token]!r})",
        file=sys.stderr,
    )
    validation = None
    if validation_reader is not None:
        validation = validation_reader.dataset(batch_size=args.batch_size).take(args.validation_steps).cache()
    return _PretrainData(
        dataset_fn=dataset_fn,
        epochs=args.steps // steps_per_epoch,
        steps_per_epoch=steps_per_epoch,
        validation=validation,
        records=records,
        start=start,
        token=token,
        baseline=baseline,
    )


def _model(args, data):
    """The BertPretrainer, compiled with its own loss and metrics: MLM averaged over the real
    masked positions (Google's loss), NSP over every example."""
    import keras_bert_impl as kb
    from keras_bert_impl.commands import model_files

    start = data.start
    if start.init is not None:
        fresh = model_files.rebuilt_backbone(start.backbone)
    else:
        fresh = kb.BertBackbone.from_preset(args.preset, vocabulary_size=len(start.vocabulary))
        fresh.set_vocabulary(start.vocabulary, start.lowercase)
    model = kb.BertPretrainer(fresh)
    if isinstance(start.init, kb.BertPretrainer):
        # Continue with the pretrained heads too, not only the encoder.
        model.set_weights(start.init.get_weights())
    compile_for_training(model, args, args.steps)
    return model


def _final_metrics(args, result):
    data = result.data
    return {
        "unigram_baseline_mlm_accuracy": data.baseline,
        "unigram_baseline_token": data.start.vocabulary[data.token],
        "final_epoch": {k: v[-1] for k, v in result.history.items()},
        "history": result.history,
        "resumed_from_step": result.resumed_from_step,
        "train_seconds_this_process": result.train_seconds,
        "epoch_train_seconds": result.epoch_train_seconds,
        "steps_this_process": args.steps - result.resumed_from_step,
        **result.settings,
        "records": os.path.abspath(data.records),
        "steps_per_epoch": data.steps_per_epoch,
    }


def _report(last, baseline):
    if not last:
        return
    parts = [
        f"MLM accuracy {last.get('mlm_logits_accuracy', math.nan):.4f} (unigram baseline {baseline:.4f})",
        f"NSP accuracy {last.get('nsp_logits_accuracy', math.nan):.4f}",
    ]
    if "val_mlm_logits_accuracy" in last:
        parts.append(
            f"held-out MLM {last['val_mlm_logits_accuracy']:.4f}, NSP {last['val_nsp_logits_accuracy']:.4f}"
        )
    print("last epoch: " + "; ".join(parts))
