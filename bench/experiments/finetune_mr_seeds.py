"""MR fine-tune of all-MiniLM-L6-v2 over several seeds: how much of the 0.81 target is noise.

The training issue's real-task item asks for accuracy >= 0.81 on the 800 held-out
sentences (one sentence is 0.00125) and quotes 0.811 for a PyTorch + transformers
fine-tune. A single run of either side moves with the seed (classifier init, dropout,
batch order), so this runs the settings of bench/perf/finetune_mr.py (scikit-learn
stratified 80/20 split with seed 0, length 64, batch 32, lr 5e-5, 3 epochs, no warm-up,
no weight decay, clipping at 1.0) for seeds 0..N-1 on three sides:

- ours, pooled [CLS] head (`kbert finetune --pooling pooled`, the reference's head);
- ours, mean-pooled head (`--pooling mean`, how all-MiniLM-L6-v2 was trained);
- the PyTorch reference (bench/reference/finetune_mr_pytorch.py, BertForSequenceClassification).

The split is the same for every seed; only the training seed changes. Finished runs
(a run folder with metrics.json, or a reference JSON) are reused, so the sweep can be
stopped and continued. Accuracy only: the epoch-time comparison is bench/perf/finetune_mr.py.

    make experiment-finetune-mr-seeds     # or:
    .venv/bin/python -m bench.experiments.finetune_mr_seeds --seeds 5 --torch-python .venv-torch/bin/python
"""

import argparse
import json
import os
import statistics
import sys

from bench.common import RESULTS, WORK, machine_info, write_report
from bench.corpora.mr_split import test_indices_sha256, write_mr_split
from bench.mr_finetune import finetune_command, finetune_ours, finetune_reference, run_folder

TARGET = 0.81


def ours(work, train_csv, test_csv, pooling, seed, epochs):
    """Test accuracy and per epoch of one `kbert finetune` run (the test part is its validation file)."""
    run = run_folder(work, pooling, seed)
    metrics = finetune_ours(
        finetune_command(train_csv, test_csv, run, epochs, pooling, seed), run, reuse=True
    )
    if len(metrics["history"]["val_accuracy"]) != epochs:
        sys.exit(
            f"{run} holds a {len(metrics['history']['val_accuracy'])}-epoch run, not --epochs {epochs}: "
            "use another --work."
        )
    return metrics["validation"]["accuracy"], metrics["history"]["val_accuracy"]


def reference(work, torch_python, seed, epochs, subset):
    """Test accuracy, per epoch, and the held-out sentences' fingerprint of one PyTorch +
    transformers run; its JSON is kept in `work` and reused."""
    from keras_bert_impl.atomic_write import write_json_atomically

    output = os.path.join(work, f"pytorch-seed{seed}.json")
    if os.path.isfile(output):
        with open(output, encoding="utf-8") as f:
            result = json.load(f)
    else:
        result = finetune_reference(torch_python, epochs, seed, subset=subset)
        write_json_atomically(result, output, indent=2)
    settings = result["settings"]
    if settings["seed"] != seed or settings["epochs"] != epochs or settings.get("split_seed", 0) != 0:
        sys.exit(
            f"{output} is not a seed {seed}, {epochs}-epoch run on the split with seed 0: use another --work."
        )
    return (
        result["test_accuracy"],
        [e["test_accuracy"] for e in result["eval_per_epoch"]],
        settings["test_indices_sha256"],
    )


def summary(values):
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
        "runs_at_or_above_target": sum(v >= TARGET for v in values),
        "runs": len(values),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--output", default=os.path.join(RESULTS, "finetune_mr_seeds.json"))
    parser.add_argument("--work", default=os.path.join(WORK, "finetune_mr"))
    parser.add_argument("--seeds", type=int, default=5, help="Seeds 0..N-1.")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "--torch-python",
        help="Python of a venv with torch + transformers (.venv-torch/bin/python); "
        "omit with --sides pooled mean.",
    )
    parser.add_argument(
        "--sides", nargs="+", choices=("pooled", "mean", "pytorch"), default=["pooled", "mean", "pytorch"]
    )
    parser.add_argument(
        "--subset",
        type=int,
        default=None,
        metavar="N",
        help="Only the first N sentences of each part of the split, on every side: a smoke run "
        "(use its own --work; its figures say nothing about the task).",
    )
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1. Received: {args.seeds}")
    if "pytorch" in args.sides and not args.torch_python:
        parser.error(
            "--sides includes pytorch: pass --torch-python (a venv with torch + transformers, "
            "`make .venv-torch/.installed`)"
        )
    os.makedirs(args.work, exist_ok=True)
    machine = machine_info()

    _, _, train_idx, test_idx, train_csv, test_csv = write_mr_split(args.work, subset=args.subset)

    # The reference computes its own split; every seed must hold out these sentences.
    expected_test_hash = test_indices_sha256(test_idx)
    runs = {side: {} for side in args.sides}
    # Seed by seed, so that a stopped sweep has every side for the seeds it finished.
    for seed in range(args.seeds):
        for side in args.sides:
            if side == "pytorch":
                accuracy, per_epoch, test_hash = reference(
                    args.work, args.torch_python, seed, args.epochs, args.subset
                )
                if test_hash != expected_test_hash:
                    sys.exit(
                        f"the PyTorch run with seed {seed} held out other sentences than "
                        f"bench/corpora/mr_split.py's split (test-index hash {test_hash}, expected "
                        f"{expected_test_hash}): use another --work."
                    )
            else:
                accuracy, per_epoch = ours(args.work, train_csv, test_csv, side, seed, args.epochs)
            runs[side][seed] = {"test_accuracy": accuracy, "test_accuracy_per_epoch": per_epoch}
            print(f"seed {seed} {side}: {accuracy:.4f}", flush=True)

    results = {
        "settings": {
            "split": (
                "scikit-learn stratified 80/20, seed 0 (bench/corpora/mr_split.py), the same for every seed"
            ),
            "train_examples": len(train_idx),
            "test_examples": len(test_idx),
            "subset": args.subset,
            "epochs": args.epochs,
            "batch_size": 32,
            "seq_len": 64,
            "learning_rate": 5e-5,
            "warmup_fraction": 0.0,
            "weight_decay": 0.0,
            "seeds": list(range(args.seeds)),
            "seed_controls": "ours: --seed (head init, dropout, shuffling); PyTorch: torch.manual_seed and "
            "the shuffling generator",
        },
        "target": f"accuracy >= {TARGET} (the issue's PyTorch figure: 0.811)",
        "sides": {
            side: {
                "runs": {str(s): r for s, r in per_seed.items()},
                "summary": summary([r["test_accuracy"] for r in per_seed.values()]),
            }
            for side, per_seed in runs.items()
        },
    }
    write_report(
        args.output,
        "MR sentence polarity, all-MiniLM-L6-v2 weights, fine-tuned over several seeds",
        results,
        machine,
    )
    for side, body in results["sides"].items():
        s = body["summary"]
        print(
            f"{side:8s} mean {s['mean']:.4f} sd {s['sd']:.4f} min {s['min']:.4f} max {s['max']:.4f} "
            f"({s['runs_at_or_above_target']}/{s['runs']} runs >= {TARGET})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
