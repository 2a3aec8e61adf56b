"""Where LiteRT's time goes in our classifier on XNNPACK, kernel by kernel: Linux `perf` samples
of warm forwards of the cpu_peers classifier, for two graphs (the Keras model's own and
`LiteRtForms`', the one `LiteRtForward` converts a classifier in) in dynamic-range int8 and float32.

    .venv/bin/python -m bench.perf.litert_profile --output bench/results/litert_profile.json

LiteRT's Python package has no per-op profiler, but XNNPACK's kernels keep their names in
ai_edge_litert's libpywrap_litert_common.so, so a sampling profiler names them: the
qd8-f32-qc8w GEMMs of the int8 fully connected layers, the float GEMMs, the dynamic quantization
of activations, transposes, elementwise ops, and TFLite's own kernels for the ops XNNPACK does not
take. Needs `perf` (Debian's linux-perf) and perf_event_paranoid <= 2 for a process of one's own.

Each file runs in a child process of its own at [B, W] = `--batch` x `--width` ids (sentences of
that many wordpieces, no padding; 32 x 32 is a typical cpu_peers batch, whose widths have a
median near 30): the child converts nothing, loads the .tflite, warms up, and is timed twice
over `--forwards` forwards without the profiler (the better kept: ms_per_forward); then `perf
record -g` attaches to it for one more such pass (so imports and loading are not sampled).
Every sample is put in one category by its innermost frame (CATEGORIES; a memmove by the XNNPACK
or TFLite frame that called it: a transpose's copy counts as a transpose), and a category's ms
is its share of the samples times ms_per_forward.
"""

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from bench.common import REPO, machine_info, wait_for_idle, write_report
from bench.perf.cpu_peers import FOLDER, _prepare

GRAPHS = ("keras", "litert_forms")
QUANTIZATIONS = ("dynamic_int8", "float32")
TOP_SYMBOLS = 15
# (category, test on the innermost frame's name), first match wins; copies are placed by caller
# and TFLite's own kernels by any of the three innermost frames (`categorize`).
CATEGORIES = (
    ("int8 matmuls (fully connected)", lambda s: s.startswith("xnn_qd8_") and "gemm" in s),
    ("float matmuls", lambda s: s.startswith(("xnn_f32_gemm", "xnn_f32_igemm", "xnn_f32_ppmm"))),
    ("packing batch-matmul operands", lambda s: "packw" in s),
    (
        "quantizing activations",
        lambda s: any(k in s for k in ("rminmax", "_qu8_vcvt", "_qs8_vcvt", "pack_lh", "qdu8")),
    ),
    ("transposes", lambda s: "transpose" in s),
    ("GELU", lambda s: "vgelu" in s),
    (
        "softmax and means",
        lambda s: any(k in s for k in ("rsum", "rmax", "raddstoreexpminusmax", "softmax", "reciprocal")),
    ),
    ("elementwise (residuals, LayerNorm, mask)", lambda s: s.startswith("xnn_f32_v")),
    ("thread pool", lambda s: any(k in s for k in ("pthreadpool", "thread_main", "thread_parallelize"))),
)
COPY = ("memmove", "memcpy", "memset")
# LiteRT's ways to run a file (the int8 forms'): the Interpreter LiteRtForward uses, with
# `experimental_default_delegate_latest_features` (XNNPACK's flag-protected features), at the
# static shape, and LiteRT's CompiledModel API with XNNPACK and with YNNPACK (CpuOptions).
RUNTIMES = (
    "interpreter",
    "interpreter_latest_features",
    "interpreter_static",
    "compiled_model",
    "compiled_model_ynnpack",
)
FREE_SHAPES = ("interpreter", "interpreter_latest_features")


def categorize(stack):
    """The category of one sample, `stack` its frames' symbols innermost first."""
    leaf = stack[0] if stack else "[unknown]"
    if any(k in leaf for k in COPY):
        for frame in stack[1:]:
            if "tflite::ops::builtin" in frame:
                return "TFLite kernels outside XNNPACK"
            if "transpose" in frame:
                return "transposes"
            if frame.startswith("xnn_") or "pthreadpool" in frame or "thread_" in frame:
                return "copies (reshapes, slices, concatenations)"
        return "copies (reshapes, slices, concatenations)"
    if any("tflite::ops::builtin" in frame for frame in stack[:3]):
        return "TFLite kernels outside XNNPACK"
    for name, test in CATEGORIES:
        if test(leaf):
            return name
    return "other (interpreter, Python, kernel)"


def parse_perf_script(text):
    """`perf script -F ip,sym` output -> [stack], each stack its symbols innermost first."""
    samples, stack = [], []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            if stack:
                samples.append(stack)
            stack = []
            continue
        parts = line.split(None, 1)
        stack.append(parts[1] if len(parts) > 1 else "[unknown]")
    if stack:
        samples.append(stack)
    return samples


def summarize(samples, ms_per_forward):
    categories = collections.Counter(categorize(stack) for stack in samples)
    leaves = collections.Counter(stack[0] for stack in samples)
    total = sum(categories.values())
    return {
        "samples": total,
        "by_category": {
            name: {"share": n / total, "ms": n / total * ms_per_forward}
            for name, n in categories.most_common()
        },
        "top_symbols": {name[:120]: n / total for name, n in leaves.most_common(TOP_SYMBOLS)},
    }


def _runner(flatbuffer, runtime, feed):
    """A function running `feed` through the file in `runtime` (RUNTIMES)."""
    if runtime.startswith("interpreter"):
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter(
            model_content=flatbuffer,
            num_threads=2,
            experimental_default_delegate_latest_features=runtime.endswith("latest_features"),
        )
        runner = interpreter.get_signature_runner("serving_default")
        return lambda: runner(**feed)
    # LiteRT's CompiledModel API at the file's static shape: its resizing does not carry the new
    # shapes to the outputs in LiteRT 2.3, so the file must be converted at [B, W].
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.options import CpuOptions, Options

    options = Options(cpu_options=CpuOptions(num_threads=2, enable_ynnpack=runtime.endswith("ynnpack")))
    model = CompiledModel.from_buffer(flatbuffer, options=options)
    inputs = {name: model.create_input_buffer_by_name("serving_default", name) for name in feed}
    outputs = {
        name: model.create_output_buffer_by_name("serving_default", name)
        for name in model.get_signature_list()["serving_default"]["outputs"]
    }

    def run():
        for name, buffer in inputs.items():
            buffer.write(feed[name])
        model.run_by_name("serving_default", inputs, outputs)

    return run


def child(path, batch, width, forwards, runtime="interpreter"):
    """Loads the .tflite in `runtime`, warms up, prints its timing; then, if told "go" on stdin,
    runs the same pass once more (for perf) and says so."""
    import numpy as np

    ids = np.random.RandomState(0).randint(1000, 20000, (batch, width)).astype(np.int32)
    feed = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    with open(path, "rb") as f:
        flatbuffer = f.read()
    try:
        run = _runner(flatbuffer, runtime, feed)
    except RuntimeError as error:  # a runtime this wheel lacks (YNNPACK) is recorded with its error
        print(json.dumps({"error": f"{type(error).__name__}: {str(error).strip()[:300]}"}), flush=True)
        return 0
    for _ in range(5):
        run()
    timings = []
    for _ in range(2):
        start = time.perf_counter()
        for _ in range(forwards):
            run()
        timings.append(1000 * (time.perf_counter() - start) / forwards)
    print(json.dumps({"ms_per_forward": min(timings), "timings": timings}), flush=True)
    if sys.stdin.readline().strip() != "go":
        return 0
    for _ in range(forwards):
        run()
    print(json.dumps({"done": True}), flush=True)
    return 0


def _start(path, batch, width, forwards, runtime):
    command = [
        sys.executable,
        "-m",
        "bench.perf.litert_profile",
        "--child",
        path,
        "--runtime",
        runtime,
        "--batch",
        str(batch),
        "--width",
        str(width),
        "--forwards",
        str(forwards),
    ]
    process = subprocess.Popen(
        command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, stderr=subprocess.DEVNULL
    )
    return process, json.loads(process.stdout.readline())


def timed(path, batch, width, forwards, runtime):
    """The child's timing (or its error) in `runtime`, without the profiler."""
    process, timing = _start(path, batch, width, forwards, runtime)
    process.stdin.close()
    process.wait()
    return timing


def profile(path, batch, width, forwards, folder):
    """The child's timing in LiteRT's Interpreter, and perf's samples of one more pass by category."""
    process, timing = _start(path, batch, width, forwards, "interpreter")
    data = os.path.join(folder, "perf.data")
    perf = subprocess.Popen(
        ["perf", "record", "-F", "1999", "-g", "-o", data, "-p", str(process.pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # perf attaches to every thread of the child
    process.stdin.write("go\n")
    process.stdin.flush()
    json.loads(process.stdout.readline())
    perf.send_signal(signal.SIGINT)
    _, perf_err = perf.communicate()
    process.wait()
    if perf.returncode not in (0, -signal.SIGINT) or not os.path.exists(data):
        raise SystemExit(f"perf record failed ({perf.returncode}): {perf_err[-400:]}")
    script = subprocess.run(
        ["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True, text=True, check=True
    )
    os.remove(data)
    return {**timing, **summarize(parse_perf_script(script.stdout), timing["ms_per_forward"])}


def convert(model, graph, quantization, batch=None, width=None):
    """The classifier's .tflite bytes: its Keras graph, or LiteRtForms' (what LiteRtForward converts),
    with free [None, None] inputs or static [batch, width] ones."""
    import tensorflow as tf

    from keras_bert_impl.conversion.input_contract import id_signature, named_endpoint
    from keras_bert_impl.tensor_names import MODEL_ID_INPUTS
    from keras_bert_impl.conversion.tflite_converter import convert_endpoint
    from keras_bert_impl.inference.litert_forward import convert_for_litert

    if graph == "litert_forms":
        return convert_for_litert(model, quantization, batch=batch, length=width)

    def forward(token_ids, segment_ids, padding_mask):
        outputs = model(
            {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}, training=False
        )
        return {name: tf.cast(value, tf.float32) for name, value in outputs.items()}

    return convert_endpoint(
        named_endpoint(forward, MODEL_ID_INPUTS), id_signature(MODEL_ID_INPUTS, batch, width), quantization
    )


def _write(folder, name, flatbuffer):
    path = os.path.join(folder, f"{name}.tflite")
    with open(path, "wb") as f:
        f.write(flatbuffer)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--forwards", type=int, default=200)
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "litert_profile.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--runtime", default="interpreter", choices=RUNTIMES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.batch, args.width, args.forwards) < 1:
        raise SystemExit(
            f"--batch, --width and --forwards must be >= 1. Received: {args.batch}, {args.width}, "
            f"{args.forwards}."
        )
    if args.child:
        return child(args.child, args.batch, args.width, args.forwards, args.runtime)
    if shutil.which("perf") is None:
        raise SystemExit("litert_profile needs Linux perf on PATH (Debian: apt install linux-perf).")
    import keras_bert_impl  # noqa: F401  (before keras: the library sets TensorFlow's logging and oneDNN)
    import keras

    run = _prepare(FOLDER)[3]
    model = keras.saving.load_model(os.path.join(run, "model.keras"))
    machine = machine_info()
    files = {}
    with tempfile.TemporaryDirectory(prefix="litert-profile-") as folder:
        for quantization in QUANTIZATIONS:
            for graph in GRAPHS:
                files[f"{graph}_{quantization}"] = _write(
                    folder, f"{graph}_{quantization}", convert(model, graph, quantization)
                )
        # CompiledModel needs static shapes (RUNTIMES): the same forms at [B, W], for every runtime.
        static = _write(
            folder,
            "litert_forms_dynamic_int8_static",
            convert(model, "litert_forms", "dynamic_int8", args.batch, args.width),
        )
        if args.wait_idle:
            wait_for_idle(args.wait_idle)
        profiles = {}
        for name, path in files.items():
            profiles[name] = {
                "size_bytes": os.path.getsize(path),
                **profile(path, args.batch, args.width, args.forwards, folder),
            }
            print(
                f"{name}: {profiles[name]['ms_per_forward']:.2f} ms per [{args.batch}, {args.width}] "
                "forward; "
                + ", ".join(f"{k} {v['ms']:.1f}" for k, v in list(profiles[name]["by_category"].items())[:6]),
                flush=True,
            )
        # LiteRT's runtime levers on the int8 forms: two interleaved rounds, the better kept.
        runtimes = {}
        for _ in range(2):
            for runtime in RUNTIMES:
                got = timed(
                    files["litert_forms_dynamic_int8"] if runtime in FREE_SHAPES else static,
                    args.batch,
                    args.width,
                    args.forwards,
                    runtime,
                )
                best = runtimes.get(runtime)
                if "error" in got or best is None or got["ms_per_forward"] < best["ms_per_forward"]:
                    runtimes[runtime] = got
        for runtime, got in runtimes.items():
            print(f"{runtime}: {got.get('ms_per_forward', got.get('error'))}", flush=True)
    ratios = {
        f"litert_forms_over_keras_{q}": profiles[f"keras_{q}"]["ms_per_forward"]
        / profiles[f"litert_forms_{q}"]["ms_per_forward"]
        for q in QUANTIZATIONS
    }
    results = {
        "model": os.path.relpath(run, REPO),
        "batch": args.batch,
        "width": args.width,
        "forwards": args.forwards,
        "threads": 2,
        "profiles": profiles,
        "speedup": ratios,
        "runtimes_int8_litert_forms": runtimes,
    }
    write_report(args.output, "litert_profile", results, machine)
    print(
        f"wrote {args.output}: LiteRtForms over the Keras graph "
        + ", ".join(f"{k} {v:.3f}x" for k, v in ratios.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
