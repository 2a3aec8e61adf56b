"""What every bench script shares: the repository's paths, the machine a run had, running
`kbert` and child processes, and one results file layout with a fixed header.

Every results file under bench/results/ starts with the same five keys, then the
script's own:

    benchmark     what was measured, in words
    date          when the run finished, UTC, ISO 8601
    command       the command that produced the file, from the repository root
    machine       `machine_info()` at the start of the run: CPU, cores, memory, package
                  versions, the load average then and at the end
    git_revision  {"commit": HEAD, "dirty": tracked files differed from it}

Standard library only at import time (keras_bert_impl is imported inside
`write_report`), so the PyTorch reference in its own venv (bench/reference/), which
must not import TensorFlow, can use the paths and `machine_info` too.
"""

import datetime
import importlib
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "data")
RESULTS = os.path.join(REPO, "bench", "results")
# Run folders of the benches (pretraining runs, fine-tunes, split CSVs): ignored, as data/ is.
WORK = os.path.join(DATA, "bench")
MINILM = os.path.join(DATA, "minilm")
MINILM_VOCAB = os.path.join(MINILM, "vocab.txt")
CORPORA = os.path.join(DATA, "corpora")
MR = os.path.join(CORPORA, "polarity-en-pang&lee2.csv")
REVIEWS = os.path.join(CORPORA, "polarity-en-pang&lee1.csv")
AUSTEN = os.path.join(DATA, "austen")

HEADER = ("benchmark", "date", "command", "machine", "git_revision")
# Versions recorded in every header, where installed (the torch venv has no TensorFlow,
# ours no torch).
PACKAGES = (
    "tensorflow",
    "tensorflow-text",
    "keras",
    "keras-hub",
    "tf_keras",
    "tf-models-official",
    "tokenizers",
    "numpy",
    "scikit-learn",
    "torch",
    "transformers",
)
NPROC = os.cpu_count() or 1


# --- the machine -----------------------------------------------------------------


def read_loadavg():
    """The 1, 5 and 15-minute load averages, or None where /proc is missing."""
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            return [float(v) for v in f.read().split()[:3]]
    except OSError:
        return None


def wait_for_idle(limit_seconds):
    """Sleeps until the 1-minute load average is below half the cores, at most `limit_seconds`;
    returns the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit_seconds:
        load = read_loadavg()
        if load is None or load[0] < 0.5 * NPROC:
            break
        time.sleep(10)
    return time.perf_counter() - start


def cpu_features_class():
    """keras_bert_impl/cpu_features.py's CpuFeatures, the module loaded by its path: importing the
    package would import Keras and TensorFlow, which the PyTorch reference's venv must not, and
    which would make a bench's parent process about 700 MiB, a size every child it starts then
    reports as its own peak (Linux keeps ru_maxrss across fork and exec)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_kbert_cpu_features", os.path.join(REPO, "keras_bert_impl", "cpu_features.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CpuFeatures


def _this_cpu():
    return cpu_features_class().of_this_machine()


def _onednn_default(cpu):
    """What TensorFlow 2.20 does with oneDNN when TF_ENABLE_ONEDNN_OPTS is unset: on Linux x86 only
    for CPUs with AVX512-VNNI, AVX512-BF16, AVX-VNNI or AMX (`DefaultOneDnnPolicy` in TensorFlow's
    core/util/port.cc), Eigen's kernels on the others: the AVX2-only EPYC prints no "oneDNN
    custom operations are on" line unless the variable is 1."""
    on = any(cpu.has(extension) for extension in ("VNNI", "BF16", "AMX"))
    return (
        f"<unset: TF default, {'on' if on else 'off'} on this CPU ({'has' if on else 'no'} VNNI, BF16 or "
        "AMX)>"
    )


def _mem_total():
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            return f.readline().split(":", 1)[1].strip()
    except OSError:
        return None


def machine_info(**extra):
    """The header's `machine`: CPU model and SIMD flags, cores (and this process's
    affinity), memory, OS, Python, the versions of PACKAGES that are installed, oneDNN's
    switch and the load average now; `extra` is added (a script's own facts, e.g.
    `tensorflow_threads()`)."""
    cpu = _this_cpu()
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            pass
    info = {
        "cpu_model": cpu.model,
        "cpu_simd": sorted(f for f in cpu.flags if f.startswith(("avx", "fma", "amx"))),
        "cpu_extensions": cpu.extensions,
        "nproc": os.cpu_count(),
        "sched_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "mem_total": _mem_total(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": packages,
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", _onednn_default(cpu)),
        "loadavg_at_start": read_loadavg(),
    }
    info.update(extra)
    return info


def tensorflow_threads():
    """TensorFlow's intra- and inter-op thread pool sizes (imports TensorFlow)."""
    # keras_bert_impl first: it sets TensorFlow's log level before TensorFlow loads, so a bench's
    # terminal does not open with the CUDA stub's "Could not find cuda drivers" lines.
    importlib.import_module("keras_bert_impl")
    import tensorflow as tf

    return {
        "tf_intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "tf_inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
    }


def load_warnings(load_before, load_after, prefer):
    """Warnings for a timing run whose 1-minute load average was above half the cores before
    or after timing: other processes only ever add time. `prefer` names the figures to read."""
    warnings = []
    for when, load in (("before timing", load_before), ("after timing", load_after)):
        if load and load[0] > 0.5 * NPROC:
            warnings.append(
                f"1-minute load average {load[0]:.2f} {when} on {NPROC} cores: other processes "
                f"competed for the CPU; prefer {prefer}"
            )
    return warnings


# --- the run -----------------------------------------------------------------------


def git_revision():
    """The header's `git_revision`: HEAD and whether tracked files differ from it (a run of
    uncommitted code), or None for both outside a git checkout."""

    def git(*argv):
        return subprocess.run(["git", "-C", REPO, *argv], check=True, capture_output=True, text=True).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def command_line(argv=None):
    """This run's command as typed from the repository root: `python -m bench.perf.NAME ARGS`
    (argv: the arguments, default the process's)."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    script = f"-m {spec.name}" if spec is not None else os.path.relpath(os.path.abspath(sys.argv[0]), REPO)
    arguments = sys.argv[1:] if argv is None else [str(a) for a in argv]
    return " ".join(["python", script, shlex.join(arguments)]).rstrip()


def report_header(benchmark, machine, command=None):
    """The fixed header of a results file (see the module docstring), dated now; `command`
    defaults to this process's."""
    return {
        "benchmark": benchmark,
        "date": utc_now(),
        "command": command or command_line(),
        "machine": machine,
        "git_revision": git_revision(),
    }


def write_report(path, benchmark, results, machine, command=None):
    """Writes `results` (a dict of the script's own keys) under the common header to `path`
    as JSON, atomically (a temporary file beside it, then a rename): a run stopped halfway
    leaves the previous file whole. `machine`: `machine_info()` taken when the run started
    (the load average at the end is added here). Returns the report."""
    from keras_bert_impl.atomic_write import write_json_atomically

    clash = sorted(set(HEADER) & set(results))
    if clash:
        raise ValueError(
            f"results must not use the header's keys {clash}: write_report fills the header "
            "(pass benchmark, machine and command as its arguments); rename the result's key."
        )
    machine = {**machine, "loadavg_at_end": machine.get("loadavg_at_end") or read_loadavg()}
    report = {**report_header(benchmark, machine, command), **results}
    write_json_atomically(report, path, indent=2)
    print(f"wrote {path}", flush=True)
    return report


# --- child processes -----------------------------------------------------------------


def kbert(*argv, capture=False):
    """Runs `kbert ARGV` in a child process of this venv's Python (a whole run: its own
    TensorFlow threads and memory); returns its standard output when `capture`."""
    argv = [str(a) for a in argv]
    print("+ kbert " + shlex.join(argv), flush=True)
    return subprocess.run(
        [sys.executable, "-m", "keras_bert_impl.cli", *argv],
        check=True,
        cwd=REPO,
        stdout=subprocess.PIPE if capture else None,
        text=True,
    ).stdout


def kbert_serve(model, flags, stderr=subprocess.DEVNULL):
    """`kbert serve --model MODEL FLAGS --port 0` started as a user starts it, the console script
    (`python -m keras_bert_impl.cli` imports the package, and TensorFlow, first): (process, port,
    seconds to its "Serving" line). A server that does not start ends the bench in one line."""
    started = time.perf_counter()
    server = subprocess.Popen(
        [
            os.path.join(os.path.dirname(sys.executable), "kbert"),
            "serve",
            "--model",
            model,
            "--port",
            "0",
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        cwd=REPO,
    )
    line = server.stdout.readline()
    ready = time.perf_counter() - started
    if "http://127.0.0.1:" not in line:
        server.kill()
        raise SystemExit(f"kbert serve --model {model} {' '.join(flags)} did not start")
    return server, int(line.split("http://127.0.0.1:")[1].split("/")[0]), ready


def run_json_child(command, **kwargs):
    """Runs `command` from the repository root (its standard error shows as it goes) and
    returns the JSON object on the last line of its standard output."""
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True, cwd=REPO, **kwargs).stdout
    lines = out.strip().splitlines()
    if not lines:
        raise RuntimeError(f"{shlex.join(map(str, command))} printed no result on its standard output.")
    return json.loads(lines[-1])
