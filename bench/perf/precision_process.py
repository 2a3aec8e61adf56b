"""The whole `kbert predict --file` process over the 4,000 MR sentences at each precision,
alternating rounds: what a one-off job pays, load and int8's conversion included, which
cpu_peers' warm passes leave out. `--precision auto`'s table (keras_bert_impl/precision_choice.py)
cites it beside cpu_peers' per-pass ratios.

    .venv/bin/python -m bench.perf.precision_process --output bench/results/precision_process.json

The model and sentences are cpu_peers' (data/bench/cpu_peers/, made by its preparation when
missing). Each round runs every precision once, in an order rotated from round to round; a
process's seconds are its wall time from start to exit, output to /dev/null. The results file
holds one run per CPU kind, as cpu_peers.json does.
"""

import argparse
import os
import subprocess
import sys
import time

from bench.common import REPO, machine_info, read_loadavg, report_header, wait_for_idle
from bench.perf.cpu_peers import FOLDER, _prepare, _summary, results_by_cpu

PRECISIONS = ("fp32", "bf16", "int8", "auto")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="Comma-separated subset of fp32,bf16,int8,auto.")
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "precision_process.json"))
    args = parser.parse_args(argv)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    if not precisions or set(precisions) - set(PRECISIONS) or args.rounds < 1:
        raise SystemExit(f"--precisions takes a subset of {','.join(PRECISIONS)} (received {args.precisions!r}); "
                         f"--rounds >= 1 (received {args.rounds}).")
    texts, _, _, run, _, sentences, _ = _prepare(FOLDER)
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    seconds, loads, auto_said = {p: [] for p in precisions}, [], None
    for round_ in range(args.rounds):
        order = precisions[round_ % len(precisions):] + precisions[: round_ % len(precisions)]
        for precision in order:
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "keras_bert_impl.cli", "predict", "--model", run, "--file",
                                   sentences, "--precision", precision], cwd=REPO, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, check=True)
            seconds[precision].append(time.perf_counter() - start)
            if precision == "auto":  # its one line naming the choice
                auto_said = [line for line in done.stderr.splitlines() if "--precision auto" in line]
            print(f"round {round_ + 1}: {precision} {seconds[precision][-1]:.1f} s", flush=True)
        loads.append(read_loadavg())
    rows = {p: {"seconds": s, "seconds_summary": _summary(s)} for p, s in seconds.items()}
    ratios = {f"fp32_seconds_over_{p}": {"per_round": r, **_summary(r)}
              for p in precisions if p != "fp32" and "fp32" in seconds
              for r in [[a / b for a, b in zip(seconds["fp32"], seconds[p])]]}
    results = {"sentences": len(texts), "rounds": args.rounds, "model": os.path.relpath(run, REPO),
               "processes": rows, "speed_over_fp32": ratios, "auto_said": auto_said,
               "loadavg_after_each_round": loads}
    report = {**report_header("precision_process", {**machine, "loadavg_at_end": read_loadavg()}), **results}
    from keras_bert_impl.atomic_write import write_json_atomically

    write_json_atomically(results_by_cpu(args.output, report), args.output, indent=2)
    print(f"wrote {args.output}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
