"""LoRA against full fine-tuning of all-MiniLM-L6-v2 on MR, seed by seed.

The LoRA issue's measured item: accuracy on the 800 held-out MR sentences of `kbert finetune
--lora-rank R` (adapters on --lora-targets, and the head) against a full fine-tune with the
same seeds, with each side's trainable share, Adam state, peak memory and epoch time. Both
sides get the settings of bench/experiments/finetune_mr_seeds.py (scikit-learn stratified 80/20
split with seed 0, length 64, batch 32, 3 epochs, no warm-up, no weight decay, clipping at 1.0,
the mean-pooled head) except the learning rate: 5e-5 for the full fine-tune, and LoRA's own
(--lora-learning-rate), as LoRA's adapters start at zero and train at a larger rate (the LoRA
paper and PEFT's examples use 1e-4 to 1e-3 for BERT-sized models).

Each run is its own `kbert finetune` process, so its peak resident memory (`ru_maxrss` of that
child alone, from `os.wait4`) is its own; the Adam state is counted from the run's trainable
parameters (two float32 slots each). Finished runs (a run folder with metrics.json) are reused,
so the sweep can be stopped and continued; their memory figure is the one recorded when they ran.
The acceptance: LoRA within 1 point of full fine-tuning (mean of three seeds) with <= 2% of the
weights trainable.

    make experiment-lora-mr     # or:
    .venv/bin/python -m bench.experiments.lora_mr --seeds 3
    .venv/bin/python -m bench.experiments.lora_mr --seeds 1 --epochs 1 --subset 64 \\
        --work /tmp/lora_mr_smoke --output /tmp/lora_mr.json  # smoke: its figures say nothing
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

from bench.common import REPO, RESULTS, WORK, machine_info, write_report
from bench.corpora.mr_split import write_mr_split
from bench.mr_finetune import BATCH_SIZE, SEQ_LEN, finetune_command

FULL_LEARNING_RATE = 5e-5
ADAM_SLOTS = 2  # Adam's first and second moments: one float32 each per trainable parameter
TRAINABLE_SHARE_LIMIT = 0.02
ACCURACY_POINTS = 0.01


def run_kbert(argv):
    """Runs `kbert ARGV` in a child process and returns its peak resident memory in bytes."""
    print("+ kbert " + " ".join(str(a) for a in argv), flush=True)
    child = subprocess.Popen([sys.executable, "-m", "keras_bert_impl.cli", *map(str, argv)], cwd=REPO)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, argv)
    return usage.ru_maxrss * 1024  # Linux reports kilobytes


def one_run(run, argv, epochs):
    """metrics.json of the run folder `run` (running `kbert ARGV` unless it finished before), with
    the peak memory of the process that trained it ("peak_rss_bytes", kept beside it)."""
    metrics_path, memory_path = os.path.join(run, "metrics.json"), os.path.join(run, "peak_rss.json")
    if not (os.path.isfile(metrics_path) and os.path.isfile(memory_path)):
        shutil.rmtree(run, ignore_errors=True)  # an unfinished run starts over: its time is measured whole
        peak = run_kbert(argv)
        with open(memory_path, "w", encoding="utf-8") as f:
            json.dump({"peak_rss_bytes": peak}, f)
    with open(metrics_path, encoding="utf-8") as f:
        metrics = json.load(f)
    with open(memory_path, encoding="utf-8") as f:
        metrics.update(json.load(f))
    if len(metrics["history"]["val_accuracy"]) != epochs:
        sys.exit(f"{run} holds a run of another length than --epochs {epochs}: use another --work.")
    return metrics


def side_result(metrics, trainable, parameters):
    seconds = metrics["epoch_train_seconds"]
    return {
        "test_accuracy": metrics["validation"]["accuracy"],
        "test_accuracy_per_epoch": metrics["history"]["val_accuracy"],
        "trainable_parameters": trainable,
        "parameters": parameters,
        "trainable_share": trainable / parameters,
        "adam_state_bytes": ADAM_SLOTS * 4 * trainable,
        "peak_rss_bytes": metrics["peak_rss_bytes"],
        "epoch_train_seconds": seconds,
        "epoch_train_seconds_median": statistics.median(seconds),
    }


def parameter_counts(run):
    """(trainable, all) parameters of the model a finished run saved, counted from its variables
    (the LoRA run's metrics.json counts its own the same way)."""
    import keras
    import numpy as np

    import keras_bert_impl  # noqa: F401  (registers the classes the .keras file names)

    model = keras.saving.load_model(os.path.join(run, "model.keras"), compile=False)
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    return trainable, sum(int(np.prod(v.shape)) for v in model.weights)


def summary(runs, key):
    values = [r[key] for r in runs.values()]
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--output", default=os.path.join(RESULTS, "lora_mr.json"))
    parser.add_argument("--work", default=os.path.join(WORK, "lora_mr"))
    parser.add_argument("--seeds", type=int, default=3, help="Seeds 0..N-1, each on both sides.")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lora-rank", type=int, default=8)
    parser.add_argument("--lora-targets", nargs="+", default=["query", "value"])
    parser.add_argument("--lora-learning-rate", type=float, default=5e-4)
    parser.add_argument(
        "--subset",
        type=int,
        default=None,
        metavar="N",
        help="Only the first N sentences of each part of the split: a smoke run "
        "(use its own --work; its figures say nothing about the task).",
    )
    args = parser.parse_args(argv)
    for flag in ("seeds", "epochs", "lora_rank"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1. Received: {getattr(args, flag)}")
    if not args.lora_learning_rate > 0:
        parser.error(f"--lora-learning-rate must be > 0. Received: {args.lora_learning_rate}")
    return args


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    machine = machine_info()
    _, _, train_idx, test_idx, train_csv, test_csv = write_mr_split(args.work, subset=args.subset)
    lora_name = f"lora-r{args.lora_rank}-{'+'.join(args.lora_targets)}-lr{args.lora_learning_rate}"
    runs = {"full": {}, "lora": {}}
    for seed in range(args.seeds):  # seed by seed: a stopped sweep has both sides of the seeds it finished
        for side in runs:
            run = os.path.join(args.work, f"{'full' if side == 'full' else lora_name}-seed{seed}")
            argv = finetune_command(train_csv, test_csv, run, args.epochs, "mean", seed)
            if side == "lora":
                argv[argv.index("--learning-rate") + 1] = str(args.lora_learning_rate)
                argv += ["--lora-rank", str(args.lora_rank), "--lora-targets", *args.lora_targets]
            else:
                argv[argv.index("--learning-rate") + 1] = str(FULL_LEARNING_RATE)
            metrics = one_run(run, argv, args.epochs)
            runs[side][seed] = side_result(metrics, *parameter_counts(run))
            print(f"seed {seed} {side}: {runs[side][seed]['test_accuracy']:.4f}", flush=True)

    sides = {
        side: {
            "runs": {str(seed): result for seed, result in per_seed.items()},
            "summary": {
                key: summary(per_seed, key)
                for key in (
                    "test_accuracy",
                    "trainable_share",
                    "epoch_train_seconds_median",
                    "peak_rss_bytes",
                )
            },
        }
        for side, per_seed in runs.items()
    }
    gap = (
        sides["full"]["summary"]["test_accuracy"]["mean"] - sides["lora"]["summary"]["test_accuracy"]["mean"]
    )
    share = max(r["trainable_share"] for r in runs["lora"].values())
    results = {
        "settings": {
            "split": "scikit-learn stratified 80/20, seed 0 (bench/corpora/mr_split.py)",
            "train_examples": len(train_idx),
            "test_examples": len(test_idx),
            "subset": args.subset,
            "epochs": args.epochs,
            "batch_size": BATCH_SIZE,
            "seq_len": SEQ_LEN,
            "pooling": "mean",
            "learning_rate": {"full": FULL_LEARNING_RATE, "lora": args.lora_learning_rate},
            "lora_rank": args.lora_rank,
            "lora_targets": args.lora_targets,
            "seeds": list(range(args.seeds)),
        },
        "sides": sides,
        "acceptance": {
            "accuracy_gap_points": 100 * gap,
            "lora_trainable_share": share,
            "holds": gap <= ACCURACY_POINTS and share <= TRAINABLE_SHARE_LIMIT,
            "target": f"LoRA's mean accuracy within {100 * ACCURACY_POINTS:g} point of the full fine-tune's, "
            f"with <= {100 * TRAINABLE_SHARE_LIMIT:g}% of the weights trainable",
        },
    }
    write_report(
        args.output, "MR sentence polarity, all-MiniLM-L6-v2: LoRA against full fine-tuning", results, machine
    )
    for side, body in sides.items():
        s = body["summary"]
        print(
            f"{side:5s} accuracy mean {s['test_accuracy']['mean']:.4f} sd {s['test_accuracy']['sd']:.4f}, "
            f"trainable {100 * s['trainable_share']['mean']:.2f}%, epoch "
            f"{s['epoch_train_seconds_median']['mean']:.0f} s, "
            f"peak RSS {s['peak_rss_bytes']['mean'] / 2**20:.0f} MiB"
        )
    print(f"gap {100 * gap:.2f} points; acceptance {'holds' if results['acceptance']['holds'] else 'fails'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
