"""BERT-base forward throughput on this CPU: ours vs KerasHub vs Model Garden.

Measures, in one process and with interleaved repeats (so that machine noise
hits every variant alike), the sequences/s of a BERT-base forward pass
(sequence length 128, batch 32, float32, inference) for

  1. keras_bert_impl.BertBackbone.from_preset("bert_base"),
  2. keras_hub.models.BertBackbone with the same configuration, random weights,
  3. tf-models-official's official.nlp.modeling.networks.BertEncoderV2 (tf_keras),

each compiled as a `tf.function` around `model(inputs, training=False)`, once
without and once with `jit_compile=True` (XLA), plus a plain float32
`tf.matmul` GFLOP/s figure of the machine, the roof the models are held to.

A BERT-base forward of one 128-token sequence costs 22.4 GFLOP (2 x the
multiply-adds of the 12 layers' dense projections and the two attention
products; embeddings, softmax, LayerNorm and GELU are not counted), so the
matmul peak in sequences/s is `matmul GFLOP/s / 22.4`, and every model's
figure is also given as a fraction of that peak.

Nothing is downloaded: all three models are built from their configuration
with random weights (never `from_preset` on KerasHub).

    make bench-backbone-forward     # or:
    python -m bench.perf.backbone_forward --wait-idle 120 --output bench/results/backbone_forward.json
    python -m bench.perf.backbone_forward --repeats 3 --batches 1 --only ours  # quick look

A full run (5 repeats x 2 batches, six variants) takes about 5 minutes on an idle 2-core
machine, plus up to --wait-idle seconds, and longer when other processes compete.
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.common import (  # noqa: E402
    NPROC,
    command_line,
    load_warnings,
    machine_info,
    read_loadavg,
    tensorflow_threads,
    wait_for_idle,
    write_report,
)

tf.get_logger().setLevel("ERROR")  # one tf.function per variant trips the retracing warning

# Dense + attention multiply-adds of BERT-base at T=128, times 2, per sequence:
# 12 * 128 * 2 * (4*768*768 + 2*768*3072 + 2*128*768) = 22.35e9.
GFLOP_PER_SEQUENCE = 22.4

BERT_BASE = dict(
    vocabulary_size=30522,
    num_layers=12,
    num_heads=12,
    hidden_dim=768,
    intermediate_dim=3072,
    max_sequence_length=512,
    num_segments=2,
)

MODELS = ("ours", "kerashub", "model_garden")


def exact_flops_per_sequence(length, cfg=BERT_BASE):
    h, i, n_layers = cfg["hidden_dim"], cfg["intermediate_dim"], cfg["num_layers"]
    per_token = 4 * h * h + 2 * h * i + 2 * length * h  # multiply-adds
    return 2 * n_layers * length * per_token


def make_inputs(batch, length, seed):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(0, BERT_BASE["vocabulary_size"], size=(batch, length), dtype=np.int32)
    segment_ids = np.zeros((batch, length), np.int32)
    segment_ids[:, length // 2 :] = 1  # sentence A then sentence B
    padding_mask = np.ones((batch, length), np.int32)  # no padding: every model does the full work
    return token_ids, segment_ids, padding_mask


# --- model builders: each returns (forward(jit) -> callable, outputs_fn) --------


def build_ours(activation=None):
    import keras_bert_impl

    kwargs = {} if activation is None else {"activation": activation}
    model = keras_bert_impl.BertBackbone.from_preset("bert_base", **kwargs)

    def wrap(token_ids, segment_ids, padding_mask):
        return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}

    return model, wrap


def build_kerashub():
    import keras_hub

    model = keras_hub.models.BertBackbone(**BERT_BASE)

    def wrap(token_ids, segment_ids, padding_mask):
        return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}

    return model, wrap


def build_model_garden():
    from official.nlp.modeling.networks import BertEncoderV2

    model = BertEncoderV2(
        vocab_size=BERT_BASE["vocabulary_size"],
        hidden_size=BERT_BASE["hidden_dim"],
        num_layers=BERT_BASE["num_layers"],
        num_attention_heads=BERT_BASE["num_heads"],
        max_sequence_length=BERT_BASE["max_sequence_length"],
        type_vocab_size=BERT_BASE["num_segments"],
        inner_dim=BERT_BASE["intermediate_dim"],
    )

    def wrap(token_ids, segment_ids, padding_mask):
        return {"input_word_ids": token_ids, "input_type_ids": segment_ids, "input_mask": padding_mask}

    return model, wrap


BUILDERS = {
    "ours": build_ours,
    "kerashub": build_kerashub,
    "model_garden": build_model_garden,
    # Diagnostic: ours with the tanh GELU that KerasHub and Model Garden use.
    "ours_gelu_approximate": lambda: build_ours("gelu_approximate"),
}

DESCRIPTIONS = {
    "ours": 'keras_bert_impl.BertBackbone.from_preset("bert_base") (exact erf GELU, the preset default)',
    "kerashub": "keras_hub.models.BertBackbone(**bert_base config), random weights (tanh GELU)",
    "model_garden": "official.nlp.modeling.networks.BertEncoderV2 (tf_keras), same config (tanh GELU)",
    "ours_gelu_approximate": (
        'keras_bert_impl.BertBackbone.from_preset("bert_base", activation="gelu_approximate")'
    ),
}


def compile_forward(model, wrap, jit):
    @tf.function(jit_compile=jit, reduce_retracing=True)
    def forward(token_ids, segment_ids, padding_mask):
        out = model(wrap(token_ids, segment_ids, padding_mask), training=False)
        return out["sequence_output"], out["pooled_output"]

    return forward


# --- timing -----------------------------------------------------------------


def time_forward(forward, args):
    """(wall seconds, process CPU seconds) of one forward."""
    start, cpu = time.perf_counter(), time.process_time()
    seq, pooled = forward(*args)
    # CPU execution is synchronous, but fetch a value so nothing is left pending.
    float(pooled[0, 0].numpy())
    return time.perf_counter() - start, time.process_time() - cpu


def time_matmul(a, b, n):
    """(GFLOP/s by wall clock, GFLOP/s per CPU-second of this process x nproc) of one n x n matmul."""
    start, cpu = time.perf_counter(), time.process_time()
    c = tf.matmul(a, b)
    float(c[0, 0].numpy())
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    flop = 2 * n**3 / 1e9
    return flop / wall, flop / cpu * NPROC


def summarize(times, batch):
    """times: seconds per batch, one per repeat."""
    med, best = statistics.median(times), min(times)
    return {
        "seconds_per_batch": [round(t, 4) for t in times],
        "seconds_per_batch_median": round(med, 4),
        "seconds_per_batch_min": round(best, 4),
        "sequences_per_second_median": round(batch / med, 3),
        "sequences_per_second_best": round(batch / best, 3),
    }


def build_variants(args, models, jits, tf_inputs):
    """Every model built, compiled per jit setting, warmed up and sanity-checked:
    (variants, errors, sanity, build_seconds)."""
    variants, errors, sanity, build_seconds = {}, {}, {}, {}
    for name in models:
        t0 = time.perf_counter()
        model, wrap = BUILDERS[name]()
        eager = model(wrap(*tf_inputs), training=False)
        seq, pooled = eager["sequence_output"], eager["pooled_output"]
        sanity[name] = {
            "sequence_output_shape": list(seq.shape),
            "pooled_output_shape": list(pooled.shape),
            "finite": bool(np.isfinite(seq.numpy()).all() and np.isfinite(pooled.numpy()).all()),
            "parameters": int(sum(int(np.prod(w.shape)) for w in model.weights)),
        }
        build_seconds[name] = round(time.perf_counter() - t0, 1)
        for jit in jits:
            key = f"{name}/jit_compile={jit}"
            t0 = time.perf_counter()
            try:
                forward = compile_forward(model, wrap, jit)
                s, p = forward(*tf_inputs)  # trace + compile
                first = time.perf_counter() - t0
                sanity[name][f"max_abs_diff_eager_vs_jit_compile={jit}"] = float(
                    np.abs(s.numpy() - seq.numpy()).max()
                )
                for _ in range(args.warmup):
                    forward(*tf_inputs)
                variants[key] = forward
                build_seconds[key] = {
                    "first_call": round(first, 1),
                    "with_warmup": round(time.perf_counter() - t0, 1),
                }
                print(f"# ready {key}: first call {first:.1f}s", flush=True)
            except Exception as e:  # noqa: BLE001 - record and go on
                errors[key] = f"{type(e).__name__}: {str(e)[:500]}"
                print(f"# FAILED {key}: {errors[key]}", flush=True)
    return variants, errors, sanity, build_seconds


def timed_rounds(args, variants, tf_inputs, a, b):
    """`repeats` rounds of `batches` steps; each step times the matmul and then one forward of
    every variant, in an order rotated every step: (step_matmul, step_matmul_cpu, step_times,
    step_cpu, round_times)."""
    n, batch = args.matmul_size, args.batch_size
    keys = list(variants)
    step_matmul = []  # median matmul GFLOP/s of each step
    step_matmul_cpu = []  # the same per CPU-second x nproc
    step_times = {key: [] for key in keys}  # seconds of each single forward
    step_cpu = {key: [] for key in keys}  # process CPU seconds of each single forward
    round_times = {key: [] for key in keys}  # seconds per batch, per round
    step = 0
    for r in range(args.repeats):
        for _ in range(args.batches):
            mms = [time_matmul(a, b, n) for _ in range(args.matmul_repeats)]
            step_matmul.append(statistics.median(m[0] for m in mms))
            step_matmul_cpu.append(statistics.median(m[1] for m in mms))
            order = keys[step % len(keys) :] + keys[: step % len(keys)]
            for key in order:
                wall, cpu = time_forward(variants[key], tf_inputs)
                step_times[key].append(wall)
                step_cpu[key].append(cpu)
            step += 1
        for key in keys:
            round_times[key].append(sum(step_times[key][-args.batches :]) / args.batches)
        line = ", ".join(f"{k} {batch / round_times[k][-1]:.2f}" for k in keys)
        print(
            f"# round {r + 1}/{args.repeats}: matmul {statistics.median(step_matmul[-args.batches :]):.0f} "
            f"GFLOP/s; seq/s: {line}",
            flush=True,
        )
    return step_matmul, step_matmul_cpu, step_times, step_cpu, round_times


def print_results(report, n, mm_median, mm_best, peak_median):
    results, errors, warnings = report["results"], report["errors"], report["warnings"]
    print()
    print(
        f"matmul {n}x{n} fp32: median {mm_median:.1f} GFLOP/s, best {mm_best:.1f} "
        f"-> peak {peak_median:.2f} seq/s (median)"
    )
    print(
        f"{'variant':32s} {'seq/s med':>9s} {'best':>6s} {'s/batch min':>11s} "
        f"{'peak% med':>9s} {'best':>6s} {'paired':>6s} | {'cpu seq/s':>9s} {'cpu peak%':>9s}"
    )
    for key, s in results.items():
        mark = " *" if s.get("best_for_model") else ""
        print(
            f"{key:32s} {s['sequences_per_second_median']:9.2f} {s['sequences_per_second_best']:6.2f} "
            f"{s['seconds_per_batch_min']:11.3f} {s['fraction_of_matmul_peak_median']:9.1%} "
            f"{s['fraction_of_matmul_peak_best']:6.1%} {s['fraction_of_matmul_peak_paired_median']:6.1%} | "
            f"{s['cpu_normalized_sequences_per_second_median']:9.2f} "
            f"{s['fraction_of_matmul_peak_cpu_normalized_median']:9.1%}{mark}"
        )
    for key, err in errors.items():
        print(f"{key:40s} FAILED: {err[:100]}")
    for w in warnings:
        print(f"WARNING: {w}")
    print(
        "(* best variant per model, by median seq/s. peak% med = median seq/s / (median matmul GFLOP/s / "
        f"{GFLOP_PER_SEQUENCE}); best = best / best; paired = median over steps of the ratio within one "
        "step; cpu = per CPU-second of this process x nproc, the same against the matmul's. wall "
        f"{report['wall_seconds']:.0f}s)"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--output", help="write the JSON results here")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (interleaved across variants)")
    parser.add_argument("--batches", type=int, default=2, help="forward passes per variant per round")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=2, help="untimed forwards per variant after compiling")
    parser.add_argument("--matmul-size", type=int, default=4096)
    parser.add_argument("--matmul-repeats", type=int, default=3, help="matmuls per step (median kept)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=sorted(BUILDERS),
        default=None,
        help="models to measure (default: ours kerashub model_garden)",
    )
    parser.add_argument(
        "--jit",
        nargs="+",
        choices=("off", "on"),
        default=["off", "on"],
        help="tf.function variants: jit_compile off and/or on",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before timing, wait up to this long for the 1-minute load average to drop "
        "below half the core count (a shared machine)",
    )
    args = parser.parse_args(argv)

    wall_start = time.perf_counter()
    models = args.only or list(MODELS)
    jits = [j == "on" for j in ("off", "on") if j in args.jit]
    batch, length = args.batch_size, args.sequence_length
    tf.random.set_seed(args.seed)
    np_inputs = make_inputs(batch, length, args.seed)
    tf_inputs = tuple(tf.constant(x) for x in np_inputs)

    info = machine_info(**tensorflow_threads())
    print(f"# {info['cpu_model']}, nproc={info['nproc']}, packages {info['packages']}", flush=True)

    # Build, compile, warm up, sanity-check.
    variants, errors, sanity, build_seconds = build_variants(args, models, jits, tf_inputs)

    shapes = {(tuple(v["sequence_output_shape"]), tuple(v["pooled_output_shape"])) for v in sanity.values()}
    sanity_ok = len(shapes) == 1 and all(v["finite"] for v in sanity.values())
    sanity["all_finite_and_same_shapes"] = sanity_ok
    if not sanity_ok:
        print(f"# SANITY FAILURE: {sanity}", file=sys.stderr)

    if args.wait_idle > 0:
        waited = wait_for_idle(args.wait_idle)
        print(f"# waited {waited:.0f}s for the machine to go idle; loadavg {read_loadavg()}", flush=True)
    load_before_timing = read_loadavg()

    # Timed rounds. Each round has `batches` steps; each step times the matmul
    # and then one forward of every variant, in an order rotated every step, so
    # that noise from other processes on a shared machine hits all variants alike.
    n = args.matmul_size
    a = tf.random.normal((n, n), seed=1)
    b = tf.random.normal((n, n), seed=2)
    tf.matmul(a, b)  # warm-up
    keys = list(variants)
    step_matmul, step_matmul_cpu, step_times, step_cpu, round_times = timed_rounds(
        args, variants, tf_inputs, a, b
    )

    mm_median, mm_best = statistics.median(step_matmul), max(step_matmul)
    peak_median, peak_best = mm_median / GFLOP_PER_SEQUENCE, mm_best / GFLOP_PER_SEQUENCE
    results = {}
    for key in keys:
        s = summarize(round_times[key], batch)
        s["fraction_of_matmul_peak_median"] = round(s["sequences_per_second_median"] / peak_median, 3)
        s["fraction_of_matmul_peak_best"] = round(s["sequences_per_second_best"] / peak_best, 3)
        # Paired with the matmul of the same step: robust to slow drifts in machine load.
        paired = [batch * GFLOP_PER_SEQUENCE / t / g for t, g in zip(step_times[key], step_matmul)]
        s["fraction_of_matmul_peak_paired_median"] = round(statistics.median(paired), 3)
        s["seconds_per_forward"] = [round(t, 4) for t in step_times[key]]
        # CPU-time view: throughput per CPU-second of this process, times the core count. Time
        # other processes take from us is not counted, so it stays close to the idle-machine
        # figure under load; it also leaves out cores idling inside our own run, so it reads
        # a little high where a model cannot keep every core busy.
        cpu_seq = [batch * NPROC / c for c in step_cpu[key]]
        s["cpu_seconds_per_forward"] = [round(c, 4) for c in step_cpu[key]]
        s["cpu_normalized_sequences_per_second_median"] = round(statistics.median(cpu_seq), 3)
        s["fraction_of_matmul_peak_cpu_normalized_median"] = round(
            statistics.median(q * GFLOP_PER_SEQUENCE / g for q, g in zip(cpu_seq, step_matmul_cpu)), 3
        )
        s["achieved_gflops_median"] = round(s["sequences_per_second_median"] * GFLOP_PER_SEQUENCE, 1)
        results[key] = s
    best_per_model = {}
    for name in models:
        candidates = [k for k in results if k.startswith(name + "/")]
        if candidates:
            best = max(candidates, key=lambda k: results[k]["sequences_per_second_median"])
            best_per_model[name] = best
            results[best]["best_for_model"] = True

    # Other processes on a shared machine only ever add time: say so when they did.
    load_after = read_loadavg()
    warnings = load_warnings(load_before_timing, load_after, "the *_paired_median and cpu_normalized figures")
    if mm_best > 1.25 * mm_median:
        warnings.append(
            f"matmul best {mm_best:.0f} vs median {mm_median:.0f} GFLOP/s: the machine's speed "
            "varied during the run"
        )
    info["loadavg_before_timing"] = load_before_timing
    info["loadavg_at_end"] = load_after

    report = {
        "settings": {
            "batch_size": batch,
            "sequence_length": length,
            "dtype": "float32",
            "config": BERT_BASE,
            "inputs": "random token ids (seed %d), segment ids 0 then 1 at T/2, padding_mask all ones"
            % args.seed,
            "compiled_as": "tf.function(jit_compile=...) around model(inputs, training=False), "
            "returning sequence_output and pooled_output",
            "repeats": args.repeats,
            "batches_per_repeat": args.batches,
            "warmup_forwards": args.warmup,
            "interleaving": (
                "repeats x batches steps; each step: matmul x matmul_repeats (median kept), then one "
                "forward of every variant, order rotated every step; a repeat's time is the mean of its "
                "batches"
            ),
            "matmul": {"size": n, "dtype": "float32", "repeats_per_round": args.matmul_repeats},
            "gflop_per_sequence": GFLOP_PER_SEQUENCE,
            "gflop_per_sequence_exact": round(exact_flops_per_sequence(length) / 1e9, 3),
        },
        "models": {name: DESCRIPTIONS[name] for name in models},
        "sanity": sanity,
        "build_seconds": build_seconds,
        "matmul": {
            "gflops_per_step": [round(g, 1) for g in step_matmul],
            "cpu_normalized_gflops_per_step": [round(g, 1) for g in step_matmul_cpu],
            "cpu_normalized_gflops_median": round(statistics.median(step_matmul_cpu), 1),
            "gflops_median": round(mm_median, 1),
            "gflops_best": round(mm_best, 1),
            "peak_sequences_per_second_median": round(peak_median, 3),
            "peak_sequences_per_second_best": round(peak_best, 3),
        },
        "results": results,
        "best_variant_per_model": best_per_model,
        "errors": errors,
        "warnings": warnings,
        "wall_seconds": round(time.perf_counter() - wall_start, 1),
    }

    print_results(report, n, mm_median, mm_best, peak_median)

    if args.output:
        write_report(
            args.output,
            "BERT-base backbone forward (inference), float32, CPU",
            report,
            info,
            command=command_line(argv),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
