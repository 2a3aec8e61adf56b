"""`kbert pretrain`: BERT pretraining (masked LM + next-sentence prediction), resumable."""

import json
import math
import os
import sys
import time

import numpy as np

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.run_folder import RunFolder, add_run_folder_flags
from keras_bert_impl.commands.training_flags import add_training_flags, check_training_flags, verbosity


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "pretrain",
        help="Pretrain a BertPretrainer (MLM + NSP) from text or pretraining TFRecords.",
        description="Pretrain BERT's masked LM and next-sentence heads. From --corpus, the examples are first "
        "built as `kbert pretrain-data` does (Google's recipe: 15%% masking, 80/10/10, NSP pairs) into "
        "OUTPUT/records, once; from --records, the TFRecords of `kbert pretrain-data` (or Google's "
        "create_pretraining_data.py) are read as they are. Writes OUTPUT/model.keras (the BertPretrainer with "
        "its vocabulary: `kbert finetune --init OUTPUT` starts from it), OUTPUT/metrics.json (MLM and NSP "
        "accuracy, and the unigram baseline: the accuracy of always predicting the most frequent masked "
        "token) and TensorBoard logs. Backs up the full state every --save-every steps; the same command "
        "resumes a killed run at the exact step.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", nargs="+", metavar="FILE", help="Text files (see --corpus-format).")
    source.add_argument("--records", metavar="DIR", help="Folder of pretraining TFRecords with its pretraining.json.")
    parser.add_argument("--corpus-format", default="text", choices=["text", "reviews-csv"],
                        help="text: one sentence per line, blank line between documents; reviews-csv: a document "
                        "per CSV row (\"label\",\"text\"). Default text.")
    parser.add_argument("--vocab", required=True, help="WordPiece vocab.txt; its size sets the embedding size of a new model.")
    model_source = parser.add_mutually_exclusive_group()
    model_source.add_argument("--preset", default=None, help="Architecture of a new model, e.g. bert_tiny (random init).")
    model_source.add_argument("--init", default=None, help="Continue from a model (.keras, run folder or checkpoint folder).")
    parser.add_argument("--output", required=True, help="Run folder (created). The same command again resumes an unfinished "
                        "run and leaves a finished one as it is; other settings or edited inputs are refused.")
    add_run_folder_flags(parser)
    parser.add_argument("--steps", type=int, default=10000, help="Optimizer steps in all. Default 10000.")
    parser.add_argument("--steps-per-epoch", type=int, default=None,
                        help="Steps between progress summaries, validation and epoch-end backups. Default min(--steps, 1000).")
    parser.add_argument("--max-predictions", type=int, default=20, help="--corpus: masked positions per sequence. Default 20.")
    parser.add_argument("--dupe-factor", type=int, default=5, help="--corpus: passes over the text, new masks each. Default 5.")
    parser.add_argument("--validation-records", metavar="DIR", default=None,
                        help="Held-out pretraining TFRecords: MLM/NSP accuracy on them at each epoch end.")
    parser.add_argument("--validation-steps", type=int, default=50, help="Batches of --validation-records per evaluation. Default 50.")
    add_training_flags(parser, default_learning_rate=1e-4)
    parser.set_defaults(func=run)
    return parser


def run(args):
    # A UsageError goes up to cli.main: one line and status 2, or its traceback with --debug.
    return _run(args)


def _records(args, vocabulary):
    """The records folder: --records, or OUTPUT/records built once from --corpus."""
    from keras_bert_impl.data import PretrainingCorpus, PretrainingExampleBuilder

    if args.records:
        if not os.path.isfile(os.path.join(args.records, "pretraining.json")):
            raise UsageError(f"--records {args.records}: no pretraining.json there; make the records with kbert pretrain-data.")
        return args.records
    directory = os.path.join(args.output, "records")
    builder = PretrainingExampleBuilder(
        vocabulary, max_seq_length=args.seq_len, max_predictions_per_seq=args.max_predictions,
        dupe_factor=args.dupe_factor, seed=args.seed,
    )
    metadata_path = os.path.join(directory, "pretraining.json")
    if os.path.isfile(metadata_path):
        with open(metadata_path, encoding="utf-8") as f:
            stored = json.load(f)
        wanted = builder.metadata()
        differ = {k: (stored.get(k), v) for k, v in wanted.items() if stored.get(k) != v}
        if differ:
            raise UsageError(
                f"{directory} holds records made with other settings ({differ}): resume with those, or use a new --output."
            )
        return directory
    try:
        corpus = PretrainingCorpus(args.corpus, format=args.corpus_format)
        documents, _ = corpus.scan()
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(f"--corpus: {e}") from None
    if documents == 0:
        raise UsageError(f"--corpus {args.corpus} has no text (0 documents with --corpus-format {args.corpus_format}).")
    started = time.monotonic()
    writer = builder.write(corpus, directory)
    print(f"kbert pretrain: built {writer.count} examples from {documents} documents in "
          f"{time.monotonic() - started:.0f} s into {directory}", file=sys.stderr)
    return directory


def unigram_baseline(dataset, batches=200):
    """Accuracy of always predicting the most frequent masked token, over the first batches."""
    counts = {}
    total = 0.0
    for x, y, w in dataset.take(batches):
        ids = np.asarray(y["mlm_logits"]).ravel()
        weights = np.asarray(w["mlm_logits"]).ravel()
        for token, weight in zip(ids[weights > 0], weights[weights > 0]):
            counts[int(token)] = counts.get(int(token), 0.0) + float(weight)
        total += float(weights.sum())
    if not counts:
        return None, None
    token = max(counts, key=counts.get)
    return token, counts[token] / total


def _run(args):
    check_training_flags(args)
    if args.steps < 1:
        raise UsageError(f"--steps must be a positive integer. Received: {args.steps}")
    steps_per_epoch = args.steps_per_epoch or min(args.steps, 1000)
    if steps_per_epoch < 1:
        raise UsageError(f"--steps-per-epoch must be a positive integer. Received: {args.steps_per_epoch}")
    if args.steps % steps_per_epoch:
        raise UsageError(
            f"--steps {args.steps} must be a multiple of --steps-per-epoch {steps_per_epoch} (each epoch is that many steps)."
        )
    if not os.path.isfile(args.vocab):
        raise UsageError(f"--vocab {args.vocab!r}: no such file.")
    if args.init is None and args.preset is None:
        raise UsageError("Give --preset NAME for a new model (e.g. bert_tiny) or --init MODEL to continue one.")
    folder = RunFolder(args.output, "pretrain", args,
                       inputs=("corpus", "records", "vocab", "init", "validation_records"))
    if folder.check() == "finished":
        folder.report_finished("kbert pretrain")
        return 0

    import keras

    import keras_bert_impl as kb
    from keras_bert_impl.commands import model_files
    from keras_bert_impl.commands import training_run as tr
    from keras_bert_impl.data import PretrainingRecordReader
    from keras_bert_impl.tokenization.vocabulary import read_vocabulary, vocabulary_is_uncased
    from keras_bert_impl.training import BackupAndRestore, BackupError, fit_resumable

    strategy = tr.strategy_for(args)
    if args.init:
        init, source = model_files.load_init(args.init)
        backbone = model_files.backbone_of(init)
        vocabulary, _ = model_files.vocabulary_for(backbone, args.vocab)
        lowercase = backbone.lowercase if backbone.vocabulary is not None else vocabulary_is_uncased(vocabulary)
    else:
        if args.preset not in kb.BERT_PRESETS:
            raise UsageError(f"--preset {args.preset!r} is not a preset. Choose one of: {', '.join(sorted(kb.BERT_PRESETS))}.")
        vocabulary = read_vocabulary(args.vocab)
        lowercase = vocabulary_is_uncased(vocabulary)
        init, source = None, f"preset {args.preset} (random init)"
    max_len = backbone.max_sequence_length if init is not None else kb.BERT_PRESETS[args.preset]["max_sequence_length"]
    if args.seq_len > max_len:
        raise UsageError(f"--seq-len {args.seq_len} exceeds the model's max_sequence_length={max_len}.")

    strategy_chief = tr.is_chief(strategy)
    folder.start(write=strategy_chief)  # the checks that need no data passed; the records go into the run folder
    records = _records(args, vocabulary)
    try:
        reader = PretrainingRecordReader.from_directory(records)
        validation_reader = PretrainingRecordReader.from_directory(args.validation_records) if args.validation_records else None
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(str(e)) from None
    with open(os.path.join(records, "pretraining.json"), encoding="utf-8") as f:
        records_meta = json.load(f)
    if records_meta.get("vocabulary_size") not in (None, len(vocabulary)):
        raise UsageError(
            f"The records in {records} were made with a {records_meta['vocabulary_size']}-token vocabulary, "
            f"--vocab has {len(vocabulary)}: make the records with the same vocab.txt."
        )
    if reader.max_seq_length > max_len:
        raise UsageError(f"The records are {reader.max_seq_length} tokens long; the model takes at most {max_len}.")

    def dataset_fn():
        return reader.dataset(batch_size=args.batch_size, shuffle_buffer_size=10000, seed=args.seed)

    token, baseline = unigram_baseline(dataset_fn())
    print(f"kbert pretrain: {source}; records {records} ({records_meta.get('examples')} examples); {args.steps} steps "
          f"on {strategy.num_replicas_in_sync} replica(s); unigram MLM baseline {baseline:.4f} "
          f"(always {vocabulary[token]!r})", file=sys.stderr)

    tr.set_precision(args)
    keras.utils.set_random_seed(args.seed)
    with strategy.scope():
        if init is not None:
            fresh = model_files.rebuilt_backbone(backbone)
        else:
            fresh = kb.BertBackbone.from_preset(args.preset, vocabulary_size=len(vocabulary))
            fresh.set_vocabulary(vocabulary, lowercase)
        model = kb.BertPretrainer(fresh)
        if isinstance(init, kb.BertPretrainer):
            # Continue with the pretrained heads too, not only the encoder.
            model.set_weights(init.get_weights())
        # The pretrainer's own loss and metrics: MLM averaged over the real masked
        # positions (Google's loss), NSP over every example.
        tr.compile_for_training(model, args, args.steps)

    run_settings = {"records": os.path.abspath(records), "steps": args.steps, "steps_per_epoch": steps_per_epoch,
                    "batch_size": args.batch_size, "learning_rate": args.learning_rate, "seed": args.seed,
                    "warmup_fraction": args.warmup_fraction, "weight_decay": args.weight_decay,
                    "mixed_precision": args.mixed_precision}
    backup = BackupAndRestore(os.path.join(args.output, "backup"), save_every=args.save_every,
                              fingerprint={"model": model.get_config(), "run": run_settings})
    validation = None
    if validation_reader is not None:
        validation = validation_reader.dataset(batch_size=args.batch_size).take(args.validation_steps).cache()
    started = time.monotonic()
    callbacks = tr.run_callbacks(args.output)
    try:
        with strategy.scope():
            history = fit_resumable(
                model, dataset_fn, epochs=args.steps // steps_per_epoch, steps_per_epoch=steps_per_epoch, backup=backup,
                validation_data=validation, callbacks=callbacks, verbose=verbosity(args),
            )
    except BackupError as e:
        raise UsageError(str(e)) from None
    seconds = time.monotonic() - started
    last = {k: float(v[-1]) for k, v in history.history.items()}
    result = {
        "unigram_baseline_mlm_accuracy": baseline, "unigram_baseline_token": vocabulary[token],
        "final_epoch": last, "history": {k: [float(x) for x in v] for k, v in history.history.items()},
        "resumed_from_step": backup.restored_step, "train_seconds_this_process": seconds,
        "epoch_train_seconds": tr.epoch_seconds(callbacks),
        "steps_this_process": args.steps - backup.restored_step, **run_settings,
    }
    if strategy_chief:
        tr.atomic_save(model, os.path.join(args.output, "model.keras"))
        tr.atomic_json(result, os.path.join(args.output, "metrics.json"))
    folder.finish(None, write=strategy_chief)
    if last:
        parts = [f"MLM accuracy {last.get('mlm_logits_accuracy', math.nan):.4f} (unigram baseline {baseline:.4f})",
                 f"NSP accuracy {last.get('nsp_logits_accuracy', math.nan):.4f}"]
        if "val_mlm_logits_accuracy" in last:
            parts.append(f"held-out MLM {last['val_mlm_logits_accuracy']:.4f}, NSP {last['val_nsp_logits_accuracy']:.4f}")
        print("last epoch: " + "; ".join(parts))
    print(f"Wrote {args.output}/model.keras (BertPretrainer, {len(vocabulary)}-token vocabulary)")
    return 0
