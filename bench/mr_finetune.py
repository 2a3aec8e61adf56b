"""The MR real task's two sides, shared by bench/perf/finetune_mr.py (epoch time, one run
each) and bench/experiments/finetune_mr_seeds.py (accuracy over training seeds): our
`kbert finetune` of the MiniLM weights and the PyTorch + transformers reference, which
runs in its own venv (bench/reference/finetune_mr_pytorch.py)."""

import json
import os
import shutil

from bench.common import MINILM, kbert, run_json_child

REFERENCE_MODULE = "bench.reference.finetune_mr_pytorch"
# The real task's settings on both sides (the reference's defaults are the same).
BATCH_SIZE, SEQ_LEN, LEARNING_RATE = 32, 64, 5e-5


def run_folder(work, pooling, seed, warmup_fraction=0.0, weight_decay=0.0, length_buckets=False):
    """The run folder of one of our fine-tunes (finetune_mr_seeds.py reuses finetune_mr.py's)."""
    suffix = "-buckets" if length_buckets else ""
    return os.path.join(work, f"ours-{pooling}-seed{seed}-wu{warmup_fraction}-wd{weight_decay}{suffix}")


def finetune_command(
    train_csv,
    test_csv,
    run_dir,
    epochs,
    pooling,
    seed,
    warmup_fraction=0.0,
    weight_decay=0.0,
    length_buckets=False,
):
    """`kbert finetune` arguments of the real task: the MiniLM weights, length 64, batch 32, lr 5e-5;
    fixed-length batches (what the earlier results measured) unless `length_buckets`."""
    return [
        "finetune",
        "--task",
        "classification",
        "--init",
        MINILM,
        "--train",
        train_csv,
        "--validation",
        test_csv,
        "--no-header",
        "--columns",
        "label,text",
        "--output",
        run_dir,
        "--epochs",
        str(epochs),
        "--batch-size",
        str(BATCH_SIZE),
        "--seq-len",
        str(SEQ_LEN),
        "--learning-rate",
        str(LEARNING_RATE),
        "--warmup-fraction",
        str(warmup_fraction),
        "--weight-decay",
        str(weight_decay),
        "--seed",
        str(seed),
        "--pooling",
        pooling,
        "--save-every",
        "1000",
        "--quiet",
    ] + ([] if length_buckets else ["--fixed-length"])


def finetune_ours(command, run_dir, reuse):
    """Runs `kbert finetune` (`command` from finetune_command) and returns its metrics.json.
    `reuse`: keep a finished run (a metrics.json there); a run folder without one is an
    unfinished run, and a timing run never resumes: either is deleted and run whole."""
    metrics = os.path.join(run_dir, "metrics.json")
    if not (reuse and os.path.isfile(metrics)):
        shutil.rmtree(run_dir, ignore_errors=True)
        kbert(*command)
    with open(metrics, encoding="utf-8") as f:
        return json.load(f)


def finetune_reference(torch_python, epochs, seed, subset=None, threads=2, padding="max_length"):
    """One PyTorch + transformers run on the same split (the split's seed stays 0), run by
    the torch venv's Python; returns its result (the reference's JSON)."""
    if not (torch_python and os.access(torch_python, os.X_OK)):
        raise FileNotFoundError(
            f"--torch-python {torch_python!r} is not an executable Python: make one with torch and "
            "transformers (`make .venv-torch/.installed`, then --torch-python .venv-torch/bin/python)."
        )
    command = [
        torch_python,
        "-m",
        REFERENCE_MODULE,
        "--epochs",
        str(epochs),
        "--seed",
        str(seed),
        "--threads",
        str(threads),
        "--padding",
        padding,
    ]
    if subset is not None:
        command += ["--subset", str(subset)]
    print("+ " + " ".join(command), flush=True)
    return run_json_child(command)
