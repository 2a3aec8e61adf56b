"""MR fine-tune with length-bucketed batches: epoch time vs PyTorch + transformers padding to
the longest row of each batch, and accuracy over seeds vs fixed-length batches, one run.

Settings of bench/perf/finetune_mr.py (the real all-MiniLM-L6-v2 weights, scikit-learn's
stratified 80/20 split with seed 0, length 64, batch 32, lr 5e-5, 3 epochs, no warm-up, no
weight decay, clipping at 1.0, pooled head), for training seeds 0..N-1, alternating:

- ours with length buckets (`kbert finetune`'s default: batches of similar wordpiece length,
  each cut to its longest row rounded up to 8);
- ours with `--fixed-length` (every batch padded to 64, as before);
- the PyTorch reference (bench/reference/finetune_mr_pytorch.py) with `--padding longest`
  (each training batch cut to its longest row, transformers' DataCollatorWithPadding),
  first seed only: its epoch time is the yardstick.

Epoch time is training only (validation excluded) on every side; each side's figure is the
median of its epochs over its seeds. Accuracy is on the 800 held-out sentences.

    make bench-finetune-mr-buckets     # or:
    .venv/bin/python -m bench.perf.finetune_mr_buckets --seeds 3 --torch-python .venv-torch/bin/python \\
        --output bench/results/finetune_mr_buckets.json
"""

import argparse
import os
import statistics

from bench.common import RESULTS, WORK, machine_info, read_loadavg, wait_for_idle, write_report
from bench.corpora.mr_split import write_mr_split
from bench.mr_finetune import finetune_command, finetune_ours, finetune_reference, run_folder


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--output", default=os.path.join(RESULTS, "finetune_mr_buckets.json"))
    parser.add_argument("--work", default=os.path.join(WORK, "finetune_mr_buckets"))
    parser.add_argument(
        "--torch-python", required=True, help="Python of .venv-torch (make .venv-torch/.installed)."
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--wait-idle", type=float, default=0)
    args = parser.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    machine = machine_info()
    _, _, train_idx, test_idx, train_csv, test_csv = write_mr_split(args.work)
    if args.wait_idle:
        wait_for_idle(args.wait_idle)

    sides = {"buckets": {}, "fixed_length": {}}
    reference = None
    for seed in range(args.seeds):
        for side, buckets in (("buckets", True), ("fixed_length", False)):
            run_dir = run_folder(args.work, "pooled", seed, length_buckets=buckets)
            command = finetune_command(
                train_csv, test_csv, run_dir, args.epochs, "pooled", seed, length_buckets=buckets
            )
            metrics = finetune_ours(command, run_dir, reuse=False)  # timed whole, never resumed
            sides[side][seed] = {
                "command": "kbert " + " ".join(command),
                "accuracy": metrics["validation"]["accuracy"],
                "epoch_train_seconds": metrics["epoch_train_seconds"],
                "loadavg_after": read_loadavg(),
            }
            print(
                f"seed {seed} {side}: accuracy {sides[side][seed]['accuracy']:.4f}, "
                f"epoch seconds {metrics['epoch_train_seconds']}",
                flush=True,
            )
        if seed == 0:
            reference = finetune_reference(args.torch_python, args.epochs, seed, padding="longest")
            print(
                f"PyTorch (padding longest): accuracy {reference['test_accuracy']:.4f}, "
                f"epoch seconds {reference['epoch_seconds']}",
                flush=True,
            )

    def epoch(side):
        return statistics.median(s for run in sides[side].values() for s in run["epoch_train_seconds"])

    def mean_accuracy(side):
        return statistics.mean(run["accuracy"] for run in sides[side].values())

    torch_epoch = statistics.median(reference["epoch_seconds"])
    results = {
        "settings": {
            "split": "scikit-learn stratified 80/20, seed 0 (bench/corpora/mr_split.py)",
            "train_examples": len(train_idx),
            "test_examples": len(test_idx),
            "epochs": args.epochs,
            "batch_size": 32,
            "seq_len": 64,
            "learning_rate": 5e-5,
            "warmup_fraction": 0.0,
            "weight_decay": 0.0,
            "pooling": "pooled",
            "seeds": list(range(args.seeds)),
        },
        "ours": {side: {str(k): v for k, v in runs.items()} for side, runs in sides.items()},
        "pytorch_padding_longest": {
            k: reference[k]
            for k in ("test_accuracy", "epoch_seconds", "command", "settings")
            if k in reference
        },
        "median_epoch_seconds": {
            "buckets": epoch("buckets"),
            "fixed_length": epoch("fixed_length"),
            "pytorch_padding_longest": torch_epoch,
        },
        "epoch_time_buckets_over_pytorch_longest": round(epoch("buckets") / torch_epoch, 3),
        "epoch_time_buckets_over_fixed_length": round(epoch("buckets") / epoch("fixed_length"), 3),
        "mean_accuracy": {"buckets": mean_accuracy("buckets"), "fixed_length": mean_accuracy("fixed_length")},
        "mean_accuracy_difference_points": round(
            100 * (mean_accuracy("buckets") - mean_accuracy("fixed_length")), 3
        ),
        "targets": {
            "epoch_time_buckets_over_pytorch_longest": "<= 0.4",
            "mean_accuracy_difference_points": "within 0.5 of fixed-length",
        },
    }
    for key in (
        "median_epoch_seconds",
        "epoch_time_buckets_over_pytorch_longest",
        "mean_accuracy",
        "mean_accuracy_difference_points",
    ):
        print(f"{key}: {results[key]}", flush=True)
    write_report(
        args.output,
        "MR fine-tune, length buckets vs fixed length vs PyTorch padding to the longest",
        results,
        machine,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
