"""Where a BERT-base forward's time goes on this CPU: the gap to the matmul peak, itemised.

bench/perf/backbone_forward.py measures our backbone at about 80% of the machine's large-matmul
rate. This script says what the other 20% is. It runs the forward of
backbone_forward.py (batch 32, length 128, float32, tf.function, no XLA) with oneDNN's
verbose log on (ONEDNN_VERBOSE=1, with timestamps) in a child process, which prints every
oneDNN primitive that executes and its time. Grouped by primitive, shape and fused
post-op, and set against

  * the wall time of each forward (the time outside oneDNN primitives is TensorFlow's own
    kernels: LayerNorm, softmax inputs, adds, gathers, executor overhead),
  * the same GEMM shapes as plain `tf.matmul` in the same process (what those shapes cost
    without the model's fused bias/GELU/residual epilogues), and
  * a 4096 x 4096 x 4096 `tf.matmul`, the peak that backbone_forward.py divides by,

it splits the forward's excess over `FLOP / peak` into: GEMM shapes slower than the big
square matmul, the fused epilogues (GELU, residual add), attention's batched matmuls,
layout reorders (the heads split and merge), softmax, and everything outside oneDNN.

    make bench-backbone-profile     # or:
    python -m bench.perf.backbone_profile --wait-idle 60 --output bench/results/backbone_profile.json
    python -m bench.perf.backbone_profile --repeats 1 --output /tmp/backbone_profile.json  # quick look

About 2 minutes on an idle 2-core machine.
"""

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time

from bench.common import REPO, RESULTS, machine_info, read_loadavg, wait_for_idle, write_report

BATCH, LENGTH, HIDDEN, INTERMEDIATE, HEADS, LAYERS = 32, 128, 768, 3072, 12, 12
TOKENS = BATCH * LENGTH
# The dense GEMMs of one encoder layer, [M, K] x [K, N], as the model runs them on flat tokens.
GEMMS = {
    "qkv_projection": (TOKENS, HIDDEN, 3 * HIDDEN),
    "attention_output": (TOKENS, HIDDEN, HIDDEN),
    "ffn_intermediate": (TOKENS, HIDDEN, INTERMEDIATE),
    "ffn_output": (TOKENS, INTERMEDIATE, HIDDEN),
}
PEAK_SIZE = 4096


def child(args):
    """Runs under ONEDNN_VERBOSE: prints phase markers (ms since the epoch) as JSON on stderr."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import numpy as np
    import tensorflow as tf

    from bench.perf.backbone_forward import build_ours, compile_forward, make_inputs

    def mark(phase, start, end, **extra):
        print(
            json.dumps({"phase": phase, "start_ms": start * 1e3, "end_ms": end * 1e3, **extra}),
            file=sys.stderr,
            flush=True,
        )

    model, wrap = build_ours()
    forward = compile_forward(model, wrap, jit=False)
    inputs = [tf.constant(x) for x in make_inputs(BATCH, LENGTH, seed=0)]
    rng = np.random.default_rng(0)
    operands = {
        name: (
            tf.constant(rng.standard_normal((m, k), np.float32)),
            tf.constant(rng.standard_normal((k, n), np.float32)),
        )
        for name, (m, k, n) in GEMMS.items()
    }
    square = tf.constant(rng.standard_normal((PEAK_SIZE, PEAK_SIZE), np.float32))
    matmul = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)[0]))
    for _ in range(2):  # trace and warm up everything outside the measured phases
        forward(*inputs)[1].numpy()
        matmul(square, square).numpy()
        for a, b in operands.values():
            matmul(a, b).numpy()
    for repeat in range(args.repeats):
        start = time.time()
        matmul(square, square).numpy()
        mark("peak", start, time.time(), repeat=repeat)
        for name, (a, b) in operands.items():
            start = time.time()
            matmul(a, b).numpy()
            mark("gemm:" + name, start, time.time(), repeat=repeat)
        start = time.time()
        forward(*inputs)[1].numpy()
        mark("forward", start, time.time(), repeat=repeat)


def parse_verbose(stdout):
    """(timestamp ms, kind, post-ops, problem, ms) of every executed oneDNN primitive."""
    records = []
    for line in stdout.splitlines():
        fields = line.split(",")
        if (
            len(fields) < 14
            or fields[0] != "onednn_verbose"
            or fields[3] != "primitive"
            or fields[4] != "exec"
        ):
            continue
        # onednn_verbose,v1,timestamp,primitive,exec,engine,kind,impl,prop,memory,attributes,aux,problem,time
        attributes = fields[10]
        post_ops = (
            attributes.split("attr-post-ops:", 1)[1].split()[0] if "attr-post-ops:" in attributes else ""
        )
        records.append((float(fields[2]), fields[6], post_ops, fields[12], float(fields[13])))
    return records


def inner_product_shape(problem):
    """(M, K, N) of an inner_product problem descriptor such as mb4096ic768oc3072."""
    mb, rest = problem.split("mb", 1)[1].split("ic", 1)
    ic, oc = rest.split("oc", 1)
    return int(mb), int(ic), int(oc.split("_")[0])


def gflop(kind, problem):
    """FLOP (in GFLOP) of a GEMM-like primitive from its problem descriptor, else 0."""
    if kind == "inner_product":
        mb, ic, oc = inner_product_shape(problem)
        return 2 * mb * ic * oc / 1e9
    if kind in ("matmul", "gemm_api"):  # 32x12x128x64:32x12x64x128 or 512x512:512x512
        a, b = problem.split(":")[:2]
        a, b = [int(x) for x in a.split("x")], [int(x) for x in b.split("x")]
        batch = 1
        for x in a[:-2]:
            batch *= x
        return 2 * batch * a[-2] * a[-1] * b[-1] / 1e9
    return 0.0


def category(kind, post_ops, problem):
    if kind in ("inner_product", "gemm_api"):
        shape = inner_product_shape(problem) if kind == "inner_product" else None
        for name, gemm in GEMMS.items():
            if shape == gemm:
                return name
        return "pooler_and_other_dense"
    if kind == "matmul":
        return "attention_batched_matmuls"
    return kind  # reorder, softmax, ...


def group_item(g, wall_ms, peak, plain_gflop_per_s):
    """One primitive group's line of the median forward: its time, and for matmuls its rate against
    the square matmul's peak and (where measured alone) against the plain matmul of its shape."""
    item = {
        "ms": round(g["ms"], 1),
        "share_of_wall": round(g["ms"] / wall_ms, 4),
        "calls": g["calls"],
        "post_ops": sorted(g["post_ops"]),
    }
    if g["gflop"]:
        at_peak = g["gflop"] / peak * 1e3
        item.update(
            {
                "gflop": round(g["gflop"], 2),
                "gflop_per_s": round(g["gflop"] / g["ms"] * 1e3, 1),
                "fraction_of_peak": round(g["gflop"] / g["ms"] * 1e3 / peak, 3),
                "ms_over_peak": round(g["ms"] - at_peak, 1),
            }
        )
        if plain_gflop_per_s:
            plain_ms = g["gflop"] / plain_gflop_per_s * 1e3
            item.update(
                {
                    "plain_matmul_gflop_per_s": round(plain_gflop_per_s, 1),
                    "ms_plain_matmul_over_peak": round(plain_ms - at_peak, 1),
                    "ms_fused_epilogue_and_rest": round(g["ms"] - plain_ms, 1),
                }
            )
    return item


def analyse(records, phases):
    def in_phase(phase):
        return [r for r in records if phase["start_ms"] <= r[0] <= phase["end_ms"]]

    peaks = [
        gflop("gemm_api", f"{PEAK_SIZE}x{PEAK_SIZE}:{PEAK_SIZE}x{PEAK_SIZE}")
        / (p["end_ms"] - p["start_ms"])
        * 1e3
        for p in phases
        if p["phase"] == "peak"
    ]
    peak = statistics.median(peaks)
    plain_gflops = {}
    for name in GEMMS:
        rates = []
        for p in phases:
            if p["phase"] == "gemm:" + name:
                prims = in_phase(p)
                if prims:
                    rates.append(sum(gflop(r[1], r[3]) for r in prims) / sum(r[4] for r in prims) * 1e3)
        plain_gflops[name] = statistics.median(rates) if rates else None

    forwards = []
    for p in phases:
        if p["phase"] != "forward":
            continue
        wall_ms = p["end_ms"] - p["start_ms"]
        groups = collections.defaultdict(lambda: {"ms": 0.0, "gflop": 0.0, "calls": 0, "post_ops": set()})
        for _, kind, post_ops, problem, ms in in_phase(p):
            g = groups[category(kind, post_ops, problem)]
            g["ms"] += ms
            g["gflop"] += gflop(kind, problem)
            g["calls"] += 1
            if post_ops:
                g["post_ops"].add(post_ops)
        forwards.append((wall_ms, groups))
    # The median forward by wall time, reported whole (mixing medians across groups would not add up).
    wall_ms, groups = sorted(forwards, key=lambda f: f[0])[len(forwards) // 2]
    total_gflop = sum(g["gflop"] for g in groups.values())
    ideal_ms = total_gflop / peak * 1e3
    onednn_ms = sum(g["ms"] for g in groups.values())
    items = {}
    for name, g in sorted(groups.items(), key=lambda kv: -kv[1]["ms"]):
        items[name] = group_item(g, wall_ms, peak, plain_gflops.get(name))
    outside_ms = wall_ms - onednn_ms
    gap_ms = wall_ms - ideal_ms

    def over(names, key="ms_over_peak"):
        return sum(items[n].get(key, 0.0) for n in names if n in items)

    dense = list(GEMMS) + ["pooler_and_other_dense"]
    budget = {
        "dense_gemm_shapes_below_square_peak_ms": round(over(GEMMS, "ms_plain_matmul_over_peak"), 1),
        "fused_epilogues_gelu_residual_ms": round(over(GEMMS, "ms_fused_epilogue_and_rest"), 1),
        "pooler_and_other_dense_over_peak_ms": round(over(["pooler_and_other_dense"]), 1),
        "attention_batched_matmuls_over_peak_ms": round(over(["attention_batched_matmuls"]), 1),
        "layout_reorders_ms": round(items.get("reorder", {}).get("ms", 0.0), 1),
        "softmax_ms": round(items.get("softmax", {}).get("ms", 0.0), 1),
        "other_onednn_ms": round(
            sum(
                v["ms"]
                for k, v in items.items()
                if k not in dense + ["attention_batched_matmuls", "reorder", "softmax"]
            ),
            1,
        ),
        "outside_onednn_ms": round(outside_ms, 1),
    }
    return {
        "peak_gflop_per_s_median": round(peak, 1),
        "peak_gflop_per_s_per_repeat": [round(x, 1) for x in peaks],
        "forward_wall_ms_per_repeat": [round(f[0], 1) for f in forwards],
        "median_forward": {
            "wall_ms": round(wall_ms, 1),
            "sequences_per_second": round(BATCH / wall_ms * 1e3, 2),
            "gflop_counted": round(total_gflop, 1),
            "ms_at_peak": round(ideal_ms, 1),
            "fraction_of_peak": round(ideal_ms / wall_ms, 3),
            "onednn_primitives_ms": round(onednn_ms, 1),
            "outside_onednn_ms": round(outside_ms, 1),
            "gap_to_peak_ms": round(gap_ms, 1),
            "gap_budget_ms": budget,
            "primitives": items,
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--output", default=os.path.join(RESULTS, "backbone_profile.json"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--wait-idle", type=float, default=0, help="Seconds to wait for a quiet machine first."
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1. Received: {args.repeats}")
    if args.child:
        return child(args)

    machine = machine_info()
    idle = wait_for_idle(args.wait_idle) if args.wait_idle else None
    load_before = read_loadavg()
    env = dict(os.environ, ONEDNN_VERBOSE="1", ONEDNN_VERBOSE_TIMESTAMP="1", TF_CPP_MIN_LOG_LEVEL="2")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", __spec__.name, "--child", "--repeats", str(args.repeats)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    if proc.returncode:
        sys.exit(f"the profiled child failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    phases = []
    for line in proc.stderr.splitlines():
        if line.startswith('{"phase"'):
            phases.append(json.loads(line))
    records = parse_verbose(proc.stdout)
    if not records:
        sys.exit("oneDNN printed no verbose records: is TF_ENABLE_ONEDNN_OPTS=0 set?")
    result = analyse(records, phases)
    machine.update(loadavg_before=load_before, waited_for_idle=idle)
    report = {
        "method": (
            "ONEDNN_VERBOSE=1 timestamps each primitive; primitives are assigned to phases by time. "
            "'ms_over_peak' = primitive time minus its FLOP at the 4096^3 matmul rate; "
            "'ms_plain_matmul_over_peak' = the same shape as a plain tf.matmul minus that; "
            "'ms_fused_epilogue_and_rest' = the model's primitive minus the plain matmul of its shape. "
            "Verbose logging adds a little time per primitive."
        ),
        **result,
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    write_report(
        args.output,
        "BERT-base forward (batch 32, length 128, float32, tf.function) itemised by oneDNN primitive",
        report,
        machine,
    )
    m = result["median_forward"]
    print(
        f"forward {m['wall_ms']:.0f} ms = {m['fraction_of_peak']:.1%} of the "
        f"{result['peak_gflop_per_s_median']:.0f} GFLOP/s peak; gap {m['gap_to_peak_ms']:.0f} ms:"
    )
    for k, v in m["gap_budget_ms"].items():
        print(f"  {k:45s} {v:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
