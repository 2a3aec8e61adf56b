"""How much of an MR fine-tuning step is the optimizer: the fine-tuning bench's model (the
real all-MiniLM-L6-v2 under a classification head, AdamW at 5e-5 with global clipping, as
`kbert finetune` builds it), one [32, 32] batch (a typical length bucket of MR), medians of
repeated steps in one process:

- a whole `train_on_batch` (forward, backward, optimizer);
- the optimizer's `apply` alone, on every trainable variable (zero gradients, a tf.function);
- the same on the token embedding table alone (30,522 x 384: Adam's moments of every row
  are read and written each step, though a batch touches a few hundred rows).

Its question: could a cheaper optimizer step bring bucketed fine-tuning from 0.55x to the
0.4x of PyTorch's epoch time that issue 19 asks for (bench/results/finetune_mr_buckets.json)?

    make bench-train-step-optimizer     # or:
    .venv/bin/python -m bench.perf.train_step_optimizer --output bench/results/train_step_optimizer.json
"""

import argparse
import os
import statistics
import time

from bench.common import MINILM, RESULTS, machine_info, wait_for_idle, write_report


def median_seconds(function, repeats):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--output", default=os.path.join(RESULTS, "train_step_optimizer.json"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--wait-idle", type=float, default=0)
    args = parser.parse_args(argv)
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    machine = machine_info()

    import numpy as np
    import tensorflow as tf

    import keras_bert_impl as kb
    from keras_bert_impl.checkpoints import convert_checkpoint
    from keras_bert_impl.training import create_optimizer

    backbone, _ = convert_checkpoint(MINILM, "huggingface", with_heads=False)
    model = kb.BertClassifier(backbone, num_classes=2)
    model.compile(optimizer=create_optimizer(5e-5, train_steps=1000, warmup_steps=0, weight_decay=0.0))
    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.width)
    x = {
        "token_ids": rng.integers(1000, 30000, shape).astype("int32"),
        "segment_ids": np.zeros(shape, "int32"),
        "padding_mask": np.ones(shape, "int32"),
    }
    y = rng.integers(0, 2, (args.batch_size,)).astype("int32")
    for _ in range(3):
        model.train_on_batch(x, y)
    step = median_seconds(lambda: model.train_on_batch(x, y), args.repeats)

    def apply_on(variables):
        gradients = [tf.zeros_like(v) for v in variables]
        apply = tf.function(lambda: model.optimizer.apply(gradients, variables))
        apply()
        apply()
        return median_seconds(apply, args.repeats)

    variables = model.trainable_variables
    table = [v for v in variables if "token_embedding" in v.path]
    optimizer_all, optimizer_table = apply_on(variables), apply_on(table)
    results = {
        "settings": {
            "model": "all-MiniLM-L6-v2 + classification head",
            "batch": list(shape),
            "optimizer": "kbert's AdamW (global clipping 1.0), lr 5e-5",
            "repeats": args.repeats,
        },
        "parameters": {
            "trainable": int(sum(np.prod(v.shape) for v in variables)),
            "token_embedding": int(sum(np.prod(v.shape) for v in table)),
        },
        "median_seconds": {
            "train_step": step,
            "optimizer_apply_all": optimizer_all,
            "optimizer_apply_token_embedding": optimizer_table,
        },
        "share_of_step": {
            "optimizer_apply_all": optimizer_all / step,
            "optimizer_apply_token_embedding": optimizer_table / step,
        },
    }
    for key in ("median_seconds", "share_of_step"):
        print(f"{key}: {results[key]}", flush=True)
    write_report(args.output, "Share of an MR fine-tuning step spent in the optimizer", results, machine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
