"""The whole `kbert predict --file` process over the 4,000 MR sentences at each precision,
alternating rounds: what a one-off job pays, load and int8's conversion included, which
cpu_peers' warm passes leave out. `--precision auto`'s table (keras_bert_impl/precision_choice.py)
cites it beside cpu_peers' per-pass ratios.

    .venv/bin/python -m bench.perf.precision_process --output bench/results/precision_process.json

The model and sentences are cpu_peers' (data/bench/cpu_peers/, made by its preparation when
missing). Each round runs every contender once, in an order rotated from round to round; a
process's seconds are its wall time from start to exit, output to /dev/null, and its peak
resident memory its own rusage's ru_maxrss (os.wait4). The results file
holds one run per CPU kind, as cpu_peers.json does.

The contenders are precisions (`--precision`; `fp32_litert` is fp32 on `--runtime litert`), each
LiteRT one twice: with KBERT_CACHE_DIR=off, a first process that converts the model (the name
alone: what every run before the cache measured, and what `auto` is timed with), and `_cached`,
a later one that reads the converted file from a warm cache (inference/litert_cache.py: a folder
of this bench's, filled by one process per LiteRT contender before the rounds).
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

from bench.common import REPO, machine_info, read_loadavg, report_header, wait_for_idle
from bench.perf.cpu_peers import FOLDER, _prepare, _summary, results_by_cpu

# Contender -> (`kbert predict` flags, whether it reads the warm cache).
CONTENDERS = {
    "fp32": (["--precision", "fp32"], False),
    "bf16": (["--precision", "bf16"], False),
    "int8": (["--precision", "int8"], False),
    "int8_cached": (["--precision", "int8"], True),
    "auto": (["--precision", "auto"], False),
    "fp32_litert": (["--precision", "fp32", "--runtime", "litert"], False),
    "fp32_litert_cached": (["--precision", "fp32", "--runtime", "litert"], True),
}
# The environment variable of keras_bert_impl/inference/litert_cache.py (spelled here: this
# parent imports the package only to write its results, after the rounds).
CACHE_VARIABLE = "KBERT_CACHE_DIR"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--contenders",
        default=",".join(CONTENDERS),
        help=f"Comma-separated subset of {','.join(CONTENDERS)}.",
    )
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "precision_process.json"))
    args = parser.parse_args(argv)
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    if not contenders or set(contenders) - set(CONTENDERS) or args.rounds < 1:
        raise SystemExit(
            f"--contenders takes a subset of {','.join(CONTENDERS)} (received {args.contenders!r}); "
            f"--rounds >= 1 (received {args.rounds})."
        )
    texts, _, _, run, _, sentences, _ = _prepare(FOLDER)
    machine = machine_info()
    cache = os.path.join(FOLDER, "precision_process_cache")
    shutil.rmtree(cache, ignore_errors=True)  # warmed by this run only

    def predict(contender):
        """(its stderr, its peak resident memory in MiB) of one `kbert predict` process."""
        flags, cached = CONTENDERS[contender]
        env = {**os.environ, CACHE_VARIABLE: cache if cached else "off"}
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "keras_bert_impl.cli",
                "predict",
                "--model",
                run,
                "--file",
                sentences,
                *flags,
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        stderr = process.stderr.read()
        process.stderr.close()
        # wait4 reaps this very child and gives its own rusage: ru_maxrss is its peak (from the fork
        # on, so it includes this parent's small size at that moment).
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            raise SystemExit(
                f"{contender}: kbert predict exited with {process.returncode}:\n{stderr[-2000:]}"
            )
        return stderr, usage.ru_maxrss / 1024

    for contender in contenders:  # the warm-up: one process converts and keeps the file
        if CONTENDERS[contender][1]:
            predict(contender)
    cache_files = _files(cache)
    if args.wait_idle:
        wait_for_idle(args.wait_idle)
    seconds, peaks, loads, auto_said = {c: [] for c in contenders}, {c: [] for c in contenders}, [], None
    for round_ in range(args.rounds):
        order = contenders[round_ % len(contenders) :] + contenders[: round_ % len(contenders)]
        for contender in order:
            start = time.perf_counter()
            stderr, peak = predict(contender)
            seconds[contender].append(time.perf_counter() - start)
            peaks[contender].append(round(peak, 1))
            if contender == "auto":  # its one line naming the choice
                auto_said = [line for line in stderr.splitlines() if "--precision auto" in line]
            print(f"round {round_ + 1}: {contender} {seconds[contender][-1]:.1f} s", flush=True)
        loads.append(read_loadavg())
    if _files(cache) != cache_files:  # a timed _cached process converted: the warm cache was not warm
        raise SystemExit(f"the cache's files changed during the rounds: {cache_files} -> {_files(cache)}")
    rows = {
        c: {
            "seconds": s,
            "seconds_summary": _summary(s),
            "peak_rss_mib": peaks[c],
            "flags": CONTENDERS[c][0],
            "cache": "warm" if CONTENDERS[c][1] else "off",
        }
        for c, s in seconds.items()
    }
    ratios = {
        f"fp32_seconds_over_{c}": {"per_round": r, **_summary(r)}
        for c in contenders
        if c != "fp32" and "fp32" in seconds
        for r in [[a / b for a, b in zip(seconds["fp32"], seconds[c])]]
    }
    results = {
        "sentences": len(texts),
        "rounds": args.rounds,
        "model": os.path.relpath(run, REPO),
        "processes": rows,
        "speed_over_fp32": ratios,
        "auto_said": auto_said,
        "cache_files": sorted(cache_files),
        "loadavg_after_each_round": loads,
    }
    report = {**report_header("precision_process", {**machine, "loadavg_at_end": read_loadavg()}), **results}
    from keras_bert_impl.atomic_write import write_json_atomically

    write_json_atomically(results_by_cpu(args.output, report), args.output, indent=2)
    print(f"wrote {args.output}", flush=True)
    return 0


def _files(cache):
    """{name: inode} of the cache's files: a file converted again is renamed into place anew (the
    same name, another inode)."""
    folder = os.path.join(cache, "litert")
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return {name: os.stat(os.path.join(folder, name)).st_ino for name in names}


if __name__ == "__main__":
    sys.exit(main())
