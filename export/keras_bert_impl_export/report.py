"""The export report: per artifact its size, latency through the runtime that serves it,
its metric on the validation examples and how far its outputs are from the Keras model's.

Latency is timed round-robin (one call of each artifact in turn, `repeats` rounds), so a
busy moment on a shared machine slows every artifact alike and the ratios hold.

The outputs are compared on every example at the export's sequence length (texts truncated
there). Where a head's outputs are one per example (a classifier's, an embedder's) and the
artifact takes ids of any length (the ids SavedModel, the free-shape .tflite files), the
examples run sorted by length and each batch is cut to its longest row, as TextPredictor's
batches are: attention and pooling ignore padding, so the outputs are those at the full
length (within float rounding), for about half the work on MR sentences (27 wordpieces on
average, padded to 64). The Keras model's outputs are computed the same way. Files of a
static shape and the raw-text artifacts pad every example, as their callers do; per-token
outputs keep the full width (their padded positions are compared too).

Shape legend: N examples, S sequence length, B batch, T a batch's cut width.
"""

import os
import time

import numpy as np
import tensorflow as tf

from keras_bert_impl.atomic_write import write_json_atomically, write_text_atomically, write_atomically
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS
from keras_bert_impl.cpu_features import CpuFeatures
from keras_bert_impl.conversion.native_log import native_output_held
from keras_bert_impl_export.tokenized_examples import text_request, tokenize

LATENCY_BATCHES = (1, 32)


def directory_size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, names in os.walk(path) for f in names)


class _Runner:
    """One artifact behind one call: ids (or texts) in, a dict of numpy outputs out."""

    def __init__(self, label, path, kind, serving):
        self.label, self.path, self.kind, self.serving = label, path, kind, serving
        self.one_row = False
        # The ids' length: the export's, or a static file's own ([1, S] of --static-lengths).
        self.length = serving.sequence_length
        # Whether it takes ids of any length (a batch cut to its longest row).
        self.free_length = kind == "saved_model_ids"
        if kind == "text_tflite":
            from keras_bert_impl_export.text_in_tflite import text_in_interpreter

            self.interpreter = text_in_interpreter(open(path, "rb").read())
        elif kind == "tflite" or kind == "mediapipe":
            from ai_edge_litert.interpreter import Interpreter

            self.interpreter = Interpreter(model_path=path)  # default CPU delegate (XNNPACK)
            self.runner = self.interpreter.get_signature_runner("serving_default")
            # MediaPipe's files and the integer-only ones are [1, S]: one example a call.
            shape = self.interpreter.get_input_details()[0]["shape_signature"]
            self.one_row = kind == "mediapipe" or shape[0] == 1
            if shape[1] > 0:
                self.length = int(shape[1])
            else:
                self.free_length = True
            # LiteRT applies XNNPACK on the first run and says so on stderr: a padding row's
            # run, its line held back (shown only if it fails).
            with native_output_held():
                self.runner(**{k: np.zeros((1, self.length), np.int32) for k in EXPORT_ID_INPUTS})
        else:
            self.function = tf.saved_model.load(path).signatures["serving_default"]

    def __call__(self, ids, texts):
        if self.kind == "text_tflite":
            from keras_bert_impl_export.text_in_tflite import run_text_in

            request = list(text_request(self.serving, texts).values())
            out = run_text_in(self.interpreter, *request)
        elif self.kind == "saved_model_text":
            out = self.function(**{k: tf.constant(v) for k, v in text_request(self.serving, texts).items()})
        elif self.kind == "saved_model_ids":
            out = self.function(**{k: tf.constant(ids[k]) for k in EXPORT_ID_INPUTS})
        elif self.one_row:
            rows = [
                self.runner(**{k: ids[k][i : i + 1] for k in EXPORT_ID_INPUTS})
                for i in range(len(ids["ids"]))
            ]
            return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}
        else:
            out = self.runner(**{k: ids[k] for k in EXPORT_ID_INPUTS})
        return {k: np.asarray(v) for k, v in out.items()}


def _run_all(call, x, texts, size, cut):
    """`call(ids, texts)` over every example, `size` at a time -> {output: array [N, ...]} in
    the examples' order. `cut`: the examples sorted by length (longest first) and each batch's
    ids cut to its longest row ([B, T]); else in order at the full width ([B, S])."""
    lengths = x["mask"].sum(axis=1)  # [N]
    order = np.argsort(-lengths, kind="stable") if cut else np.arange(len(texts))
    parts = {}
    for first in range(0, len(order), size):
        rows = order[first : first + size]
        width = int(lengths[rows].max()) if cut else x["mask"].shape[1]
        for k, v in call({k: v[rows, :width] for k, v in x.items()}, [texts[i] for i in rows]).items():
            parts.setdefault(k, []).append(np.asarray(v))
    back = np.argsort(order)  # [N]: where each example's row is in the run's order
    return {k: np.concatenate(v)[back] for k, v in parts.items()}


def _compared_output(serving, outputs):
    """The output the differences are measured on: logits where the head has them."""
    for key in ("logits", "probabilities", "start_logits", "embeddings"):
        if key in outputs:
            return key
    raise KeyError(sorted(outputs))


def build_report(work, manifest, serving, texts, labels=None, repeats=20, log=print):
    """Measures every artifact in `manifest["files"]` (paths relative to `work`) and writes
    report.json, report.md and report.png there; returns the report dict.

    Args:
        texts: validation examples (texts, or (a, b) pairs), at least one.
        labels: their class ids (classifiers), or None: then no accuracy, only agreement
            with Keras.
    """
    if not texts:
        raise ValueError("The validation set is empty: pass a --validation file with examples.")
    x = tokenize(serving, texts)
    # One output per example: padding changes nothing, so batches may be cut (module docstring).
    cut = serving.kind in ("classifier", "embedder")
    keras_out = _run_all(
        lambda ids, _: serving.id_outputs(*(tf.constant(ids[k]) for k in EXPORT_ID_INPUTS)), x, texts, 64, cut
    )
    key = _compared_output(serving, keras_out)
    runners = []
    for file_key, relative in manifest["files"].items():
        kind = (
            "tflite"
            if file_key.startswith("tflite_")
            else "mediapipe"
            if file_key.startswith("mediapipe")
            else file_key
        )
        runners.append(_Runner(file_key, os.path.join(work, relative), kind, serving))
    # Each runner's ids at its own length: static files of other lengths see the texts
    # tokenized (and truncated) at theirs, as an app would feed them.
    inputs = {serving.sequence_length: x}
    for r in runners:
        if r.length not in inputs:
            inputs[r.length] = tokenize(serving, texts, r.length)
    rows = [
        _quality(r, serving, inputs[r.length], texts, labels, keras_out, key, cut and r.free_length, log)
        for r in runners
    ]
    for row, runner in zip(rows, runners, strict=True):
        row["runs_on"] = _runs_on(runner)
    keras_row = {"artifact": "keras", "size_bytes": None, "compared_output": key}
    keras_row.update(_metric(serving, keras_out, labels))
    latency = _latency(runners, inputs, texts, repeats, log)
    for row in rows:
        row.update(latency[row["artifact"]])
    report = {
        "model": manifest["model_class"],
        "head": manifest["head"],
        "sequence_length": manifest["sequence_length"],
        "validation_examples": len(texts),
        "latency_repeats": repeats,
        "machine": {"cpus": os.cpu_count(), "cpu": CpuFeatures.of_this_machine().to_dict()},
        "keras": keras_row,
        "artifacts": rows,
    }
    write_json_atomically(report, os.path.join(work, "report.json"), indent=1)
    write_text_atomically(report_markdown(report), os.path.join(work, "report.md"))
    png = _chart(report)

    def write_png(tmp):
        with open(tmp, "wb") as f:
            f.write(png)

    write_atomically(os.path.join(work, "report.png"), write_png, suffix=".png")
    return report


def _runs_on(runner):
    """Where the artifact runs: TensorFlow for a SavedModel; for a .tflite, the targets its
    static checks allow (conversion/tflite_targets.py: no GPU or NPU delegate runs here)."""
    if runner.kind.startswith("saved_model"):
        return ["TensorFlow"]
    from keras_bert_impl.conversion.tflite_targets import TfliteTargets

    with open(runner.path, "rb") as f:
        return TfliteTargets(f.read()).runs_on()


def _metric(serving, outputs, labels):
    if labels is None or serving.kind != "classifier":
        return {}
    probabilities = outputs.get("probabilities", outputs.get("logits"))
    if serving.model.multi_label:
        predicted = probabilities >= (0.5 if "probabilities" in outputs else 0.0)
        return {
            "metric": "exact_match",
            "value": float(np.mean(np.all(predicted == (np.asarray(labels) > 0), -1))),
        }
    return {"metric": "accuracy", "value": float(np.mean(np.argmax(probabilities, -1) == np.asarray(labels)))}


def _quality(runner, serving, x, texts, labels, keras_out, key, cut, log):
    start = time.perf_counter()
    out = _run_all(runner, x, texts, 32, cut)
    compared = key if key in out else _compared_output(serving, out)
    got, want = out[compared].astype(np.float32), keras_out[compared]
    row = {
        "artifact": runner.label,
        "size_bytes": directory_size(runner.path),
        "sequence_length": runner.length,
        "compared_output": compared,
        "max_abs_difference": float(np.max(np.abs(got - want))),
    }
    if serving.kind in ("classifier", "tagger"):
        row["top_label_agreement"] = float(np.mean(np.argmax(got, -1) == np.argmax(want, -1)))
    if serving.kind == "embedder":
        cosine = np.sum(got * want, -1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(want, axis=-1))
        row["min_cosine"] = float(np.min(cosine))
    row.update(_metric(serving, out, labels))
    log(f"  checked {runner.label} on {len(texts)} examples in {time.perf_counter() - start:.1f} s")
    return row


def _latency(runners, inputs, texts, repeats, log):
    """p50/p90 per artifact and batch size; `inputs`: the tokenized texts by length."""
    timings = {r.label: {b: [] for b in LATENCY_BATCHES} for r in runners}
    for batch in LATENCY_BATCHES:
        if batch > len(texts):
            continue
        ids = {length: {k: v[:batch] for k, v in x.items()} for length, x in inputs.items()}
        chosen = texts[:batch]
        usable = [r for r in runners if not (r.one_row and batch > 1)]
        for r in usable:
            r(ids[r.length], chosen)  # warm-up (first-call allocation, graph optimisation)
        for _ in range(repeats):
            for r in usable:
                start = time.perf_counter()
                r(ids[r.length], chosen)
                timings[r.label][batch].append(time.perf_counter() - start)
        log(f"  timed batch {batch}: {repeats} rounds over {len(usable)} artifacts")
    result = {}
    for label, by_batch in timings.items():
        row = {}
        for batch, seconds in by_batch.items():
            if seconds:
                row[f"batch{batch}_p50_ms"] = 1000 * float(np.percentile(seconds, 50))
                row[f"batch{batch}_p90_ms"] = 1000 * float(np.percentile(seconds, 90))
        result[label] = row
    return result


def _fmt(value, spec):
    return "" if value is None else format(value, spec)


def report_markdown(report):
    machine = report["machine"]
    # int8 and bf16 latency is a property of the CPU (its VNNI, BF16, AMX), so the line names
    # it; reports written before it was recorded say only the count.
    cpu = f" of {CpuFeatures.from_dict(machine['cpu']).describe()}" if "cpu" in machine else ""
    lines = [
        f"# Export report: {report['model']} ({report['head']}), sequence length {report['sequence_length']}",
        "",
        f"{report['validation_examples']} validation examples; latency over {report['latency_repeats']} "
        f"round-robin rounds on {machine['cpus']} CPUs{cpu} (LiteRT's default CPU delegate for .tflite, "
        "a freshly loaded SavedModel otherwise).",
        "",
    ]
    keras_row = report["keras"]
    if "metric" in keras_row:
        lines += [f"Keras model: {keras_row['metric']} {keras_row['value']:.4f}", ""]
    # "runs on" (static checks, conversion/tflite_targets.py) is a column where the report has it.
    runs_on = any("runs_on" in row for row in report["artifacts"])
    lines += [
        "| artifact | size (MB) | batch 1 p50 / p90 (ms) | batch 32 p50 / p90 (ms) | metric | max abs diff "
        "vs Keras "
        "| top-label agreement |" + (" runs on |" if runs_on else ""),
        "|---|---|---|---|---|---|---|" + ("---|" if runs_on else ""),
    ]
    for row in report["artifacts"]:
        lines.append(
            f"| {row['artifact']} | {row['size_bytes'] / 1e6:.1f} "
            f"| {_fmt(row.get('batch1_p50_ms'), '.2f')} / {_fmt(row.get('batch1_p90_ms'), '.2f')} "
            f"| {_fmt(row.get('batch32_p50_ms'), '.1f')} / {_fmt(row.get('batch32_p90_ms'), '.1f')} "
            f"| {_fmt(row.get('value'), '.4f')} | {row['max_abs_difference']:.2e} ({row['compared_output']}) "
            f"| {_fmt(row.get('top_label_agreement', row.get('min_cosine')), '.4f')} |"
            + (f" {', '.join(row.get('runs_on', []))} |" if runs_on else "")
        )
    if runs_on:
        lines += [
            "",
            "Runs on: from static checks of each file, as no GPU or NPU delegate runs here "
            '(docs/export.md, "Where each file runs").',
        ]
    return "\n".join(lines) + "\n"


def _chart(report):
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["artifacts"]
    names = [r["artifact"] for r in rows]
    panels = [
        ("size (MB)", [r["size_bytes"] / 1e6 for r in rows]),
        ("batch-1 latency p50 (ms)", [r.get("batch1_p50_ms", 0.0) for r in rows]),
        (
            "accuracy" if "value" in report["keras"] else "top-label agreement",
            [r.get("value", r.get("top_label_agreement", r.get("min_cosine", 0.0))) for r in rows],
        ),
    ]
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for axis, (title, values) in zip(axes, panels):
        axis.barh(names, values, color="#4c72b0")
        axis.set_title(title)
        axis.invert_yaxis()
        for i, v in enumerate(values):
            axis.text(v, i, f" {v:.3g}", va="center", fontsize=8)
    figure.suptitle(f"kbert export: {report['model']} ({report['head']})")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()
