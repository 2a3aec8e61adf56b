"""Pretrain bert_tiny from scratch on the movie reviews, then fine-tune it on MR
against the same backbone with random weights: the training issue's pretraining item.

Everything runs through the `kbert` commands a user would type:
1. `kbert pretrain-data` on the held-out reviews (every 10th review of
   polarity-en-pang&lee1.csv) -> validation records;
2. `kbert pretrain --corpus` on the other 90% with the MiniLM uncased vocabulary,
   `--preset bert_tiny`, from scratch; with --phase2-steps, a second run continues it
   (`kbert pretrain --init`) at a longer length;
3. `kbert finetune` on MR (the scikit-learn stratified 80/20 split with seed 0 of
   bench/corpora/mr_split.py, the 80% split again 90/10 into fit and dev) from the pretrained
   model and from a randomly initialised bert_tiny with the same vocabulary, over a
   learning-rate grid; each init's rate is chosen on dev, `kbert evaluate` scores the
   test part; plus a linear probe on each init's frozen vectors.

With --extra-corpus (Google's text format: a sentence per line, a blank line between
documents; `make data-austen` writes the Austen novels of DATA.md as data/austen/austen.txt)
every 10th document of it is held out too, and the other documents join the training
reviews in one text file, the documents of both shuffled together (seed 0) so that
NotNext segments come from either corpus as in BERT's Wikipedia + BookCorpus. Pretraining
still validates on the held-out reviews (every run's figures compare); at the end the
final pretrainer is also scored on the held-out extra documents alone and on both held-out
sets together (the training mixture); `--validate-on mixed_heldout` scores the mixture after
every epoch instead.

`--run NAME` runs one of the committed configurations (RUNS below: its settings, its work
folder under --work-root, its results file in --results-dir); flags after it override
its settings. `make experiment-pretrain-tiny` runs them all (PRETRAIN_TINY_RUNS picks some):

    make data-austen
    .venv/bin/python -m bench.experiments.pretrain_tiny --run austen_30k
    # the same as
    .venv/bin/python -m bench.experiments.pretrain_tiny --work data/bench/pretrain_tiny_austen_30k \
        --vocab-size 8000 --steps 30000 --steps-per-epoch 1000 --seq-len 64 --pretrain-learning-rate 1e-3 \
        --selection-seeds 5 --extra-corpus data/austen/austen.txt \
        --output bench/results/pretrain_tiny_austen_30k.json
    # a smoke run: a few steps, one learning rate, one epoch, in scratch folders
    .venv/bin/python -m bench.experiments.pretrain_tiny --run vocab8k_30k --work-root /tmp/smoke/work \
        --results-dir /tmp/smoke --steps 20 --steps-per-epoch 10 --finetune-learning-rates 1e-3 \
        --finetune-epochs 1 --extra-seeds 0
"""

import argparse
import csv
import json
import os
import shlex
import subprocess
import sys

from bench.common import (
    AUSTEN,
    MINILM_VOCAB,
    RESULTS,
    REVIEWS,
    REPO,
    WORK,
    kbert,
    machine_info,
    run_json_child,
    write_report,
)
from bench.corpora.mr_split import mr_split, write_csv, write_mr_split

# The committed runs (bench/README.md): name -> (work folder under --work-root, results file
# in --results-dir, settings). Runs that share a work folder share their pretraining.
RUNS = {
    "5k": (
        "pretrain_tiny_5k",
        "pretrain_tiny.json",
        "--steps 5000 --steps-per-epoch 1000 --seq-len 128 --pretrain-learning-rate 1e-3",
    ),
    "len64": (
        "pretrain_tiny_len64",
        "pretrain_tiny_len64.json",
        "--steps 12000 --steps-per-epoch 1000 --seq-len 64 --pretrain-learning-rate 1e-3",
    ),
    "len64_phase2": (
        "pretrain_tiny_len64",
        "pretrain_tiny_len64_phase2.json",
        "--steps 12000 --steps-per-epoch 1000 --seq-len 64 --phase2-steps 3000 --phase2-seq-len 128 "
        "--pretrain-learning-rate 1e-3 --extra-seeds 4",
    ),
    "vocab8k": (
        "pretrain_tiny_vocab8k",
        "pretrain_tiny_vocab8k.json",
        "--vocab-size 8000 --steps 12000 --steps-per-epoch 1000 --seq-len 64 --pretrain-learning-rate 1e-3 "
        "--extra-seeds 4",
    ),
    "vocab8k_phase2": (
        "pretrain_tiny_vocab8k",
        "pretrain_tiny_vocab8k_phase2.json",
        "--vocab-size 8000 --steps 12000 --steps-per-epoch 1000 --seq-len 64 --phase2-steps 3000 "
        "--phase2-seq-len 128 --pretrain-learning-rate 1e-3 --extra-seeds 4",
    ),
    "vocab8k_30k": (
        "pretrain_tiny_vocab8k_30k",
        "pretrain_tiny_vocab8k_30k.json",
        "--vocab-size 8000 --steps 30000 --steps-per-epoch 1000 --seq-len 64 --pretrain-learning-rate 1e-3 "
        "--extra-seeds 4",
    ),
    "austen_5k": (
        "pretrain_tiny_austen_5k",
        "pretrain_tiny_austen_5k.json",
        "--vocab-size 8000 --steps 5000 --steps-per-epoch 500 --seq-len 64 --pretrain-learning-rate 1e-3 "
        "--selection-seeds 5 --extra-corpus {austen} --validate-on mixed_heldout",
    ),
    "austen_30k": (
        "pretrain_tiny_austen_30k",
        "pretrain_tiny_austen_30k.json",
        "--vocab-size 8000 --steps 30000 --steps-per-epoch 1000 --seq-len 64 --pretrain-learning-rate 1e-3 "
        "--selection-seeds 5 --extra-corpus {austen}",
    ),
}


def heldout_records(args, work, extra_heldout):
    """{name: records folder} of every held-out set, built once at the first phase's length
    and used by every phase (so their figures compare): the held-out reviews, and with
    --extra-corpus the held-out extra documents and both together."""
    sets = {
        "reviews_heldout": (
            os.path.join(work, "reviews_heldout.csv"),
            "reviews-csv",
            os.path.join(work, "heldout_records"),
        )
    }
    sets.update({name: (text, "text", records) for name, (text, records) in extra_heldout.items()})
    for name, (source, text_format, records) in sets.items():
        if not os.path.isfile(os.path.join(records, "pretraining.json")):
            kbert(
                "pretrain-data",
                source,
                "--format",
                text_format,
                "--vocab",
                args.vocab,
                "--output",
                records,
                "--dupe-factor",
                "1",
                "--seq-len",
                args.seq_len,
                "--num-shards",
                1,
                "--quiet",
            )
        with open(os.path.join(records, "pretraining.json")) as f:
            length = json.load(f)["max_seq_length"]
        if length != args.seq_len:
            sys.exit(
                f"{records} holds {length}-token records, not --seq-len {args.seq_len}: use another --work."
            )
    return {name: records for name, (_, _, records) in sets.items()}


def pretrain_phase(args, work, folder, steps, seq_len, init, validation):
    """One `kbert pretrain` run (skipped when its finished metrics.json is there), scored
    after every epoch on the `validation` records; returns (run folder, its metrics,
    training seconds)."""
    run = os.path.join(work, folder)
    metrics_file = os.path.join(run, "metrics.json")
    if os.path.isfile(metrics_file):
        with open(metrics_file) as f:
            done = json.load(f)
        if done.get("steps") == steps:
            # metrics.json is written when a run finishes; running kbert pretrain again would
            # start a new run (the backup of a finished run is gone).
            print(f"{run} already holds a finished {steps}-step run", flush=True)
            return run, done, done["train_seconds_this_process"]
    source = ("--init", init) if init else ("--preset", "bert_tiny")
    corpus = (
        ("--corpus", os.path.join(work, "pretrain_corpus.txt"), "--corpus-format", "text")
        if args.extra_corpus
        else ("--corpus", os.path.join(work, "reviews_train.csv"), "--corpus-format", "reviews-csv")
    )
    kbert(
        "pretrain",
        *corpus,
        "--vocab",
        args.vocab,
        *source,
        "--output",
        run,
        "--steps",
        steps,
        "--steps-per-epoch",
        args.steps_per_epoch,
        "--batch-size",
        32,
        "--seq-len",
        seq_len,
        "--learning-rate",
        args.pretrain_learning_rate,
        "--validation-records",
        validation,
        "--quiet",
    )
    with open(metrics_file) as f:
        done = json.load(f)
    return run, done, done["train_seconds_this_process"]


def extra_documents(args):
    """Documents (lists of sentences) of the --extra-corpus files, in order; every 10th of
    this list is held out."""
    from keras_bert_impl.data import PretrainingCorpus

    return list(PretrainingCorpus(args.extra_corpus, format="text")) if args.extra_corpus else []


def write_mixed_corpora(work, reviews, extra):
    """With --extra-corpus: pretrain_corpus.txt (90% of the reviews and 90% of the extra
    documents, shuffled together) and the held-out text files; returns the held-out record
    sets to score at the end as {name: (text file, records folder)}."""
    import random

    from keras_bert_impl.atomic_write import write_text_atomically
    from keras_bert_impl.data import documents_to_text, split_sentences

    # The reviews' rows split as reviews_train.csv / reviews_heldout.csv are.
    review_docs = [(i, split_sentences(r[-1])) for i, r in enumerate(reviews)]
    extra_docs = list(enumerate(extra))
    train = [d for i, d in review_docs + extra_docs if d and i % 10 != 9]
    heldout_extra = [d for i, d in extra_docs if i % 10 == 9]
    heldout_mixed = [d for i, d in review_docs if d and i % 10 == 9] + heldout_extra
    # The record builder's NotNext pool is a window of 1,000 documents over the file, so the
    # order of the file decides which corpora a NotNext segment can come from: shuffle.
    random.Random(0).shuffle(train)
    random.Random(0).shuffle(heldout_mixed)
    write_text_atomically(documents_to_text(train), os.path.join(work, "pretrain_corpus.txt"))
    sets = {"extra_heldout": heldout_extra, "mixed_heldout": heldout_mixed}
    for name, documents in sets.items():
        write_text_atomically(documents_to_text(documents), os.path.join(work, f"{name}.txt"))
    return {name: (os.path.join(work, f"{name}.txt"), os.path.join(work, f"{name}_records")) for name in sets}


def pretraining_accuracy_child(model_path, records):
    """Prints the MLM and NSP accuracy of a saved BertPretrainer over every record of a folder."""
    import keras
    import numpy as np

    from keras_bert_impl.data import PretrainingRecordReader

    model = keras.saving.load_model(model_path)
    mlm_hits = mlm_total = nsp_hits = examples = 0.0
    for x, y, w in PretrainingRecordReader.from_directory(records).dataset(batch_size=64):
        out = model(x, training=False)
        predicted = np.asarray(out["mlm_logits"]).argmax(-1)  # [B, P]
        weights = np.asarray(w["mlm_logits"])
        mlm_hits += float(((predicted == np.asarray(y["mlm_logits"])) * weights).sum())
        mlm_total += float(weights.sum())
        nsp = np.asarray(out["nsp_logits"]).argmax(-1)
        nsp_hits += float((nsp == np.asarray(y["nsp_logits"]).reshape(nsp.shape)).sum())
        examples += len(nsp)
    print(
        json.dumps(
            {
                "examples": int(examples),
                "mlm_accuracy": mlm_hits / mlm_total,
                "nsp_accuracy": nsp_hits / examples,
            }
        )
    )


def probe_child(init, work):
    """Prints the accuracy of a logistic regression on frozen, mean-pooled final-layer vectors
    of the backbone in `init` (fit on mr_fit.csv, scored on mr_dev.csv and mr_test.csv)."""
    import keras
    import numpy as np
    import tensorflow as tf
    from sklearn.linear_model import LogisticRegression

    from keras_bert_impl.tokenization import BertPreprocessor

    model = keras.saving.load_model(init if init.endswith(".keras") else os.path.join(init, "model.keras"))
    backbone = getattr(model, "backbone", model)
    preprocessor = BertPreprocessor.from_model(backbone, sequence_length=64)

    def features(name):
        with open(os.path.join(work, name), encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        vectors = []
        for start in range(0, len(rows), 256):
            inputs = preprocessor(tf.constant([r[1] for r in rows[start : start + 256]]))
            sequence = backbone(inputs, training=False)["sequence_output"].numpy()  # [B, T, H]
            mask = inputs["padding_mask"].numpy()[..., None].astype("float32")
            vectors.append((sequence * mask).sum(1) / mask.sum(1))
        return np.concatenate(vectors), np.array([r[0] for r in rows])

    x_fit, y_fit = features("mr_fit.csv")
    classifier = LogisticRegression(max_iter=5000).fit(x_fit, y_fit)
    print(
        json.dumps({part: float(classifier.score(*features(f"mr_{part}.csv"))) for part in ("dev", "test")})
    )


def phase_report(run, metrics, seconds, args):
    history = metrics["history"]
    with open(os.path.join(run, "records", "pretraining.json")) as f:
        records = json.load(f)
    return {
        "run": os.path.relpath(run, REPO),
        "steps": metrics["steps"],
        "batch_size": metrics["batch_size"],
        "seq_len": records.get("max_seq_length"),
        "learning_rate": metrics["learning_rate"],
        "records_examples": records["examples"],
        "seconds": seconds,
        "heldout_seq_len": args.seq_len,
        "heldout_per_epoch_is": args.validate_on,
        "unigram_baseline_mlm_accuracy": metrics["unigram_baseline_mlm_accuracy"],
        "unigram_baseline_token": metrics["unigram_baseline_token"],
        "train_mlm_accuracy_per_epoch": history.get("mlm_logits_accuracy"),
        "train_nsp_accuracy_per_epoch": history.get("nsp_logits_accuracy"),
        "heldout_mlm_accuracy_per_epoch": history.get("val_mlm_logits_accuracy"),
        "heldout_nsp_accuracy_per_epoch": history.get("val_nsp_logits_accuracy"),
    }


def parse_args(argv=None):
    """The arguments, with --run NAME's settings put before the ones given (which win)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--run",
        choices=sorted(RUNS),
        help="One of the committed configurations: its settings, --work and --output.",
    )
    parser.add_argument(
        "--work-root", default=WORK, help=f"With --run: the folder of its work folder. Default {WORK}."
    )
    parser.add_argument(
        "--results-dir",
        default=RESULTS,
        help=f"With --run: the folder of its results file. Default {RESULTS}.",
    )
    parser.add_argument(
        "--output", help="The results file (default: --run's, else pretrain_tiny.json in --results-dir)."
    )
    parser.add_argument("--work", help="Run folders (default: --run's, else pretrain_tiny in --work-root).")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--steps-per-epoch", type=int, default=500)
    parser.add_argument("--pretrain-learning-rate", type=float, default=5e-4)
    parser.add_argument(
        "--finetune-learning-rates",
        type=float,
        nargs="+",
        default=[1e-4, 3e-4, 1e-3, 3e-3],
        help="Grid searched per init on the dev set.",
    )
    parser.add_argument(
        "--pooling",
        choices=("pooled", "mean"),
        default="mean",
        help="Fine-tuning head input (kbert finetune --pooling). mean: the tokens' MLM-trained "
        "vectors; pooled: the [CLS] pooler, which only NSP trains.",
    )
    parser.add_argument("--finetune-epochs", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=128, help="Pretraining sequence length in wordpieces.")
    parser.add_argument(
        "--phase2-steps",
        type=int,
        default=0,
        help="Then continue (kbert pretrain --init, heads included) for this many steps at "
        "--phase2-seq-len, as BERT did (90%% of its steps at 128 tokens, the rest at 512).",
    )
    parser.add_argument("--phase2-seq-len", type=int, default=128)
    parser.add_argument(
        "--selection-seeds",
        type=int,
        default=1,
        help="Fine-tune every grid point with seeds 0..N-1 and choose each init's learning rate by "
        "the mean dev accuracy; dev and test accuracies are then means over those seeds.",
    )
    parser.add_argument(
        "--extra-seeds",
        type=int,
        default=0,
        help="Fine-tune each init's chosen learning rate again with seeds 1..N; report the mean.",
    )
    parser.add_argument(
        "--vocab-size",
        type=int,
        help="Learn a WordPiece vocabulary of about this size from the pretraining reviews "
        "(kbert vocab) instead of using MiniLM's 30,522-token uncased vocabulary.",
    )
    parser.add_argument(
        "--extra-corpus",
        nargs="+",
        metavar="FILE",
        help="More pretraining text in Google's format (a sentence per line, blank lines between "
        "documents), e.g. data/austen/austen.txt from `make data-austen`; every 10th document "
        "is held out.",
    )
    parser.add_argument(
        "--validate-on",
        default="reviews_heldout",
        choices=("reviews_heldout", "extra_heldout", "mixed_heldout"),
        help="The held-out set kbert pretrain scores after every epoch (the others need "
        "--extra-corpus). Default: the held-out reviews, as every earlier run.",
    )
    parser.add_argument("--probe-child", metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--accuracy-child", nargs=2, metavar=("MODEL", "RECORDS"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--pretrain-only", action="store_true", help="Stop after pretraining (fine-tune on a later call)."
    )
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    args = parser.parse_args(argv)
    folder, results_file = "pretrain_tiny", "pretrain_tiny.json"
    if args.run:
        folder, results_file, settings = RUNS[args.run]
        args = parser.parse_args(
            shlex.split(settings.format(austen=os.path.join(AUSTEN, "austen.txt"))) + argv
        )
    args.work = args.work or os.path.join(args.work_root, folder)
    args.output = args.output or os.path.join(args.results_dir, results_file)
    if args.selection_seeds < 1 or (args.selection_seeds > 1 and args.extra_seeds):
        parser.error(
            f"--selection-seeds must be >= 1 and cannot be combined with --extra-seeds. Received: "
            f"--selection-seeds {args.selection_seeds}, --extra-seeds {args.extra_seeds}"
        )
    if args.validate_on != "reviews_heldout" and not args.extra_corpus:
        parser.error(
            f"--validate-on {args.validate_on} needs --extra-corpus (only the reviews are held out without "
            "it)."
        )
    for path in args.extra_corpus or ():
        if not os.path.isfile(path):
            parser.error(f"--extra-corpus {path}: no such file (the Austen novels: `make data-austen`).")
    return args


def vocabulary(args, work, extra):
    """The vocab.txt the runs use: MiniLM's, or with --vocab-size a WordPiece vocabulary learned
    from the pretraining reviews only (never the held-out reviews or MR), for the pretrained and
    the random model alike; made once."""
    if not args.vocab_size:
        return MINILM_VOCAB
    vocab = os.path.join(work, "vocab.txt")
    if not os.path.isfile(vocab):
        with open(REVIEWS, encoding="utf-8-sig", newline="") as f:
            texts = [r[1] for i, r in enumerate(csv.reader(f)) if i % 10 != 9]
        # With --extra-corpus, its training documents (not the held-out tenth) count too.
        texts += ["\n".join(d) for i, d in enumerate(extra) if i % 10 != 9]
        from keras_bert_impl.atomic_write import write_text_atomically

        corpus = os.path.join(work, "reviews_train.txt")
        write_text_atomically("\n".join(texts) + "\n", corpus)
        kbert("vocab", corpus, "--size", args.vocab_size, "--output", vocab, "--quiet")
    return vocab


def grid_entry(runs):
    """One learning rate's entry of the grid from its runs {seed: (dev metrics, test metrics)}:
    one seed's accuracies, or the mean over the seeds with each seed's."""
    if len(runs) == 1:
        dev, test = runs[0]
        return {"dev_accuracy": dev["accuracy"], "test_accuracy": test["accuracy"], "test": test}
    dev_per_seed = {seed: dev["accuracy"] for seed, (dev, _) in runs.items()}
    test_per_seed = {seed: test["accuracy"] for seed, (_, test) in runs.items()}
    return {
        "dev_accuracy": sum(dev_per_seed.values()) / len(runs),
        "test_accuracy": sum(test_per_seed.values()) / len(runs),
        "dev_accuracy_per_seed": dev_per_seed,
        "test_accuracy_per_seed": test_per_seed,
    }


def run_report(args, pretrain_runs, final_scores, finetuned):
    """The results file's body: settings, vocabulary, corpora, pretraining phases and the MR
    fine-tuning of both inits."""
    return {
        "settings": {
            "run": args.run,
            "work": os.path.relpath(args.work, REPO),
            **{
                k: getattr(args, k)
                for k in (
                    "steps",
                    "steps_per_epoch",
                    "seq_len",
                    "phase2_steps",
                    "phase2_seq_len",
                    "pretrain_learning_rate",
                    "finetune_learning_rates",
                    "pooling",
                    "finetune_epochs",
                    "selection_seeds",
                    "extra_seeds",
                    "vocab_size",
                    "validate_on",
                )
            },
            "extra_corpus": [os.path.relpath(p, REPO) for p in args.extra_corpus or ()],
        },
        "vocabulary": {
            "file": os.path.relpath(args.vocab, REPO),
            "tokens": sum(1 for _ in open(args.vocab, encoding="utf-8")),
            "source": f"kbert vocab --size {args.vocab_size} on the pretraining reviews"
            + (" and the extra corpus's training documents" if args.extra_corpus else "")
            if args.vocab_size
            else "all-MiniLM-L6-v2's (BERT uncased) vocab.txt",
        },
        "pretraining_corpora": {
            "reviews": "polarity-en-pang&lee1.csv, every 10th review held out",
            **(
                {
                    "extra": [os.path.relpath(p, REPO) for p in args.extra_corpus],
                    "extra_heldout": "every 10th document of the extra corpus",
                    "mixing": "training documents of both in one file, shuffled (seed 0)",
                }
                if args.extra_corpus
                else {}
            ),
        },
        "pretraining_phases": [
            phase_report(run, metrics, seconds, args) for run, metrics, seconds in pretrain_runs
        ],
        "final_pretrainer_heldout": {
            "note": (
                "the last phase's pretrainer over every record of each held-out set (records at the first "
                "phase's length, dupe factor 1); reviews_heldout is what pretraining validated on"
            ),
            **final_scores,
        },
        "mr_finetune": {
            "settings": {
                "split": "scikit-learn stratified 80/20, seed 0 (bench/corpora/mr_split.py); the 80% split "
                "again 90/10 (seed 0) into fit and dev",
                "epochs": args.finetune_epochs,
                "batch_size": 32,
                "seq_len": 64,
                "pooling": args.pooling,
                "learning_rates": args.finetune_learning_rates,
                "selection": "per init, the learning rate with the best dev accuracy"
                + (
                    f" averaged over fine-tuning seeds 0-{args.selection_seeds - 1}; every dev and "
                    "test accuracy is that mean"
                    if args.selection_seeds > 1
                    else ""
                ),
                "frozen_linear_probe": "scikit-learn LogisticRegression (defaults, max_iter 5000) on the "
                "frozen backbone's mean-pooled final-layer vectors, fit on the fit part",
            },
            "pretrained_test_accuracy": finetuned["pretrained"]["test_accuracy"],
            "random_init_test_accuracy": finetuned["random_init"]["test_accuracy"],
            "pretrained": finetuned["pretrained"],
            "random_init": finetuned["random_init"],
        },
    }


def finetune_run(args, work, init, run, lr, seed):
    """(dev metrics, test metrics) of one `kbert finetune` run, reused when finished."""
    if not os.path.isfile(os.path.join(run, "metrics.json")):
        kbert(
            "finetune",
            "--task",
            "classification",
            "--train",
            os.path.join(work, "mr_fit.csv"),
            "--validation",
            os.path.join(work, "mr_dev.csv"),
            "--init",
            init,
            "--output",
            run,
            "--no-header",
            "--columns",
            "label,text",
            "--epochs",
            args.finetune_epochs,
            "--batch-size",
            32,
            "--seq-len",
            64,
            "--learning-rate",
            lr,
            "--pooling",
            args.pooling,
            "--seed",
            seed,
            "--quiet",
        )
    with open(os.path.join(run, "metrics.json")) as f:
        dev = json.load(f)["validation"]
    test = json.loads(
        kbert("evaluate", "--model", run, "--data", os.path.join(work, "mr_test.csv"), "--json", capture=True)
    )
    return dev, test


def finetune_init(args, work, init, folder):
    """MR fine-tuning from `init`: the learning rate chosen on dev, its extra seeds and the
    frozen linear probe."""
    grid = {}
    for lr in args.finetune_learning_rates:
        # Seed 0 keeps its old run folder name, so earlier runs are reused.
        runs = {
            seed: finetune_run(
                args,
                work,
                init,
                os.path.join(work, f"mr_{folder}_{args.pooling}_lr{lr:g}" + (f"_seed{seed}" if seed else "")),
                lr,
                seed,
            )
            for seed in range(args.selection_seeds)
        }
        grid[f"{lr:g}"] = grid_entry(runs)
    best = max(grid, key=lambda k: grid[k]["dev_accuracy"])  # first (smallest lr) on ties
    result = {"chosen_learning_rate": float(best), **grid[best], "grid": grid}
    # Fine-tuning noise: the chosen learning rate again with other seeds (head init, dropout, order).
    seeds = {0: grid[best]["test_accuracy"]}
    for seed in range(1, args.extra_seeds + 1):
        run = os.path.join(work, f"mr_{folder}_{args.pooling}_lr{best}_seed{seed}")
        seeds[seed] = finetune_run(args, work, init, run, float(best), seed)[1]["accuracy"]
    if args.extra_seeds:
        result["test_accuracy_per_seed"] = seeds
        result["test_accuracy_mean_over_seeds"] = sum(seeds.values()) / len(seeds)
    # What pretraining put into the vectors, without fine-tuning them: a linear probe.
    result["frozen_linear_probe_accuracy"] = run_json_child(
        [sys.executable, "-m", __spec__.name, "--work", work, "--probe-child", init]
    )
    return result


def main(argv=None):
    args = parse_args(argv)
    work = args.work
    os.makedirs(work, exist_ok=True)
    if args.probe_child:
        return probe_child(args.probe_child, work)
    if args.accuracy_child:
        return pretraining_accuracy_child(*args.accuracy_child)
    machine = machine_info()
    extra = extra_documents(args)
    args.vocab = vocabulary(args, work, extra)

    with open(REVIEWS, encoding="utf-8-sig", newline="") as f:
        reviews = list(csv.reader(f))
    write_csv(os.path.join(work, "reviews_train.csv"), [r for i, r in enumerate(reviews) if i % 10 != 9])
    write_csv(os.path.join(work, "reviews_heldout.csv"), [r for i, r in enumerate(reviews) if i % 10 == 9])
    extra_heldout = write_mixed_corpora(work, reviews, extra) if args.extra_corpus else {}
    texts, labels, train_idx, _, _, _ = write_mr_split(work)

    phases = [("pretrain", args.steps, args.seq_len, None)]
    if args.phase2_steps:
        phases.append(
            ("pretrain_phase2", args.phase2_steps, args.phase2_seq_len, os.path.join(work, "pretrain"))
        )
    heldout = heldout_records(args, work, extra_heldout)
    pretrain_runs = []
    for folder, steps, seq_len, init in phases:
        pretrain_runs.append(
            pretrain_phase(args, work, folder, steps, seq_len, init, heldout[args.validate_on])
        )
    pretrain_dir = pretrain_runs[-1][0]
    # The final pretrainer on every held-out set.
    final_scores = {}
    for name, records in heldout.items():
        final_scores[name] = run_json_child(
            [
                sys.executable,
                "-m",
                __spec__.name,
                "--work",
                work,
                "--accuracy-child",
                os.path.join(pretrain_dir, "model.keras"),
                records,
            ]
        )
        print(f"final pretrainer on {name}: {final_scores[name]}", flush=True)
    if args.pretrain_only:
        return 0

    # The same architecture and vocabulary with random weights (what pretraining starts from).
    random_init = os.path.join(work, "bert_tiny_random.keras")
    subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import keras, keras_bert_impl as kb; from keras_bert_impl.tokenization import "
                f"read_vocabulary;v = read_vocabulary({args.vocab!r}); keras.utils.set_random_seed(0);b = "
                "kb.BertBackbone.from_preset('bert_tiny', vocabulary_size=len(v));b.set_vocabulary(v, "
                f"lowercase=True); b.save({random_init!r})"
            ),
        ],
        check=True,
        cwd=REPO,
    )

    # Each init gets the learning rate that scores best on a dev set (10% of MR's training part,
    # stratified, seed 0); the test part is scored once per run and never used to choose.
    train_texts = [texts[i] for i in train_idx]
    train_labels = [labels[i] for i in train_idx]
    fit_idx, dev_idx = mr_split(train_texts, train_labels, seed=0, test_size=0.1)
    for name, index in (("mr_fit.csv", fit_idx), ("mr_dev.csv", dev_idx)):
        write_csv(os.path.join(work, name), [(str(train_labels[i]), train_texts[i]) for i in index])
    finetuned = {}
    pretrained_name = "pretrained" if len(phases) == 1 else "pretrained_phase2"

    for name, init in (("pretrained", pretrain_dir), ("random_init", random_init)):
        folder = pretrained_name if name == "pretrained" else name
        finetuned[name] = finetune_init(args, work, init, folder)

    benchmark = (
        "bert_tiny pretrained from scratch (MLM + NSP) on 90% of the movie reviews"
        + (" and 90% of the documents of the extra corpus" if args.extra_corpus else "")
        + ", then fine-tuned on MR"
    )
    report = run_report(args, pretrain_runs, final_scores, finetuned)
    write_report(args.output, benchmark, report, machine)
    p = report["pretraining_phases"][-1]
    print(
        f"held-out MLM accuracy {p['heldout_mlm_accuracy_per_epoch'][-1]:.4f} (unigram baseline "
        f"{p['unigram_baseline_mlm_accuracy']:.4f}), NSP {p['heldout_nsp_accuracy_per_epoch'][-1]:.4f}; MR "
        f"accuracy pretrained {report['mr_finetune']['pretrained_test_accuracy']:.4f} vs random init "
        f"{report['mr_finetune']['random_init_test_accuracy']:.4f} (learning rates chosen on dev); frozen "
        f"linear probe {finetuned['pretrained']['frozen_linear_probe_accuracy']['test']:.4f} vs "
        f"{finetuned['random_init']['frozen_linear_probe_accuracy']['test']:.4f}"
    )
    if args.extra_seeds:
        print(
            f"MR test accuracy, mean over seeds 0-{args.extra_seeds}: pretrained "
            f"{finetuned['pretrained']['test_accuracy_mean_over_seeds']:.4f} vs random init "
            f"{finetuned['random_init']['test_accuracy_mean_over_seeds']:.4f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
