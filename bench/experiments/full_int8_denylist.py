"""Which ops a full-integer int8 TFLite conversion of the MR classifier may quantize.

`kbert export`'s `int8_mixed` (keras_bert_impl/conversion/tflite_converter.py) quantizes only the
op kinds in INT8_MIXED_QUANTIZED_OPS, minus the nodes matching INT8_MIXED_FLOAT_NODES, and
keeps everything else float. This script measures that choice step by step on the model
`make demo` fine-tunes (all-MiniLM-L6-v2 on MR, data/demo/mr_run/model.keras), exported as
the token-id SavedModel at 64 tokens (`ExportSignatures(model, 64).export_archive(text=False)`):

  float32                   convert(..., "float32")
  dynamic_int8              convert(..., "dynamic_int8"): int8 weights, activations per batch
  all_int8                  every op int8: a plain tf.lite.TFLiteConverter, builtins only,
                            optimizations=[DEFAULT] and the representative dataset, no denylist
  fc_bmm_gather             convert(..., "int8_mixed", quantized_ops=(FULLY_CONNECTED,
                            BATCH_MATMUL, GATHER), float_nodes=())
  fc_gather                 quantized_ops=(FULLY_CONNECTED, GATHER), float_nodes=()
  fc_gather_ffn_out_float   the same, the feed-forward output layers float
  fc_gather_ffn_attn_float  the same, the attention output layers float too
  default                   convert(..., "int8_mixed"): INT8_MIXED_FLOAT_NODES (adds the fused
                            Q/K/V projections)

Per variant: the .tflite's size, the conversion's seconds, top-label agreement with the Keras
model's logits, accuracy and the largest absolute logit difference on the validation
sentences (every one of make demo's 800 by default, in batches of 32 as the export report
runs them), the batch-1 p50/p90 latency through ai_edge_litert's Interpreter (default CPU
delegate) on --latency-examples sentences, one call of each variant in turn (the order rotated
every sentence, so load from other processes hits every variant alike), and per op kind how
many ops the model runs and how many of them output int8. Calibration: the first
--calibration-examples training sentences (default 200, what kbert export uses).

Needs `make demo` to have run (the model and its split, data/demo/mr_*.csv):

    make demo && make experiment-full-int8-denylist     # or, in the venv:
    .venv/bin/python -m bench.experiments.full_int8_denylist --output bench/results/full_int8_denylist.json
    # smoke (its figures mean nothing):
    .venv/bin/python -m bench.experiments.full_int8_denylist --validation-examples 64 --latency-examples 4 \\
        --calibration-examples 8 --variants float32 fc_gather --output /tmp/full_int8_denylist.json
"""

import argparse
import csv
import os
import shutil
import sys
import time

import numpy as np

from bench.common import (
    DATA,
    NPROC,
    WORK,
    load_warnings,
    machine_info,
    read_loadavg,
    tensorflow_threads,
    write_report,
)
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS

DEMO = os.path.join(DATA, "demo")
MODEL = os.path.join(DEMO, "mr_run", "model.keras")
TRAIN = os.path.join(DEMO, "mr_train.csv")
VALIDATION = os.path.join(DEMO, "mr_validation.csv")
SEQUENCE_LENGTH = 64
QUALITY_BATCH = 32


def variants():
    """name -> (description, how it is converted): ("convert", quantization, quantized_ops,
    float_nodes) through tflite_converter.convert_saved_model, or ("plain_full_int8",)."""
    from keras_bert_impl.conversion.tflite_converter import INT8_MIXED_FLOAT_NODES

    ffn_out, attention_out = INT8_MIXED_FLOAT_NODES[0], INT8_MIXED_FLOAT_NODES[1]
    fc_gather = ("FULLY_CONNECTED", "GATHER")
    return {
        "float32": ("float32 weights and activations", ("convert", "float32", None, None)),
        "dynamic_int8": (
            "int8 weights, activations quantized per batch at run time",
            ("convert", "dynamic_int8", None, None),
        ),
        "all_int8": (
            "every op int8: plain TFLiteConverter, builtins, optimizations=[DEFAULT], representative "
            "dataset, nothing denylisted",
            ("plain_full_int8",),
        ),
        "fc_bmm_gather": (
            "full int8 of FULLY_CONNECTED, BATCH_MATMUL, GATHER; every other op kind float",
            ("convert", "int8_mixed", ("FULLY_CONNECTED", "BATCH_MATMUL", "GATHER"), ()),
        ),
        "fc_gather": (
            "full int8 of FULLY_CONNECTED, GATHER; attention BATCH_MATMULs float too",
            ("convert", "int8_mixed", fc_gather, ()),
        ),
        "fc_gather_ffn_out_float": (
            "fc_gather, the feed-forward output layers float",
            ("convert", "int8_mixed", fc_gather, (ffn_out,)),
        ),
        "fc_gather_ffn_attn_float": (
            "fc_gather, the feed-forward output and attention output layers float",
            ("convert", "int8_mixed", fc_gather, (ffn_out, attention_out)),
        ),
        "default": (
            "kbert export's int8_mixed: INT8_MIXED_QUANTIZED_OPS minus INT8_MIXED_FLOAT_NODES (also the "
            "fused Q/K/V projections float)",
            ("convert", "int8_mixed", None, None),
        ),
    }


def read_split(path):
    """(texts, labels as strings) of a headerless label,text CSV."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = [row for row in csv.reader(f) if row]
    return [text for _, text in rows], [label.strip() for label, _ in rows]


def plain_full_int8(saved_model_dir, calibration_inputs):
    """Every op int8: the converter's own full-integer path, no denylist (inputs int32 and
    outputs float as the SavedModel has them)."""
    import tensorflow as tf

    def representative():
        for example in calibration_inputs:
            yield {name: np.asarray(value, np.int32) for name, value in example.items()}

    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = False
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    return converter.convert()


def op_census(interpreter):
    """Per op kind: how many ops the model runs and how many output int8 (activations
    quantized). _get_ops_details is the interpreter's only listing of its ops."""
    import numpy as np

    dtypes = {t["index"]: t["dtype"] for t in interpreter.get_tensor_details()}
    census = {}
    for op in interpreter._get_ops_details():
        row = census.setdefault(op["op_name"], {"ops": 0, "int8_output": 0})
        row["ops"] += 1
        if len(op["outputs"]) and dtypes.get(op["outputs"][0]) == np.int8:
            row["int8_output"] += 1
    return dict(sorted(census.items()))


def float_node_matches(float_ops, quantized_ops, float_nodes):
    """How many ops of `quantized_ops` kinds in the float model the `float_nodes` patterns keep
    float (the denylist convert() builds), per kind."""
    import re

    counts = {}
    for op, name in float_ops:
        if op in quantized_ops and any(re.search(p, name) for p in float_nodes):
            counts[op] = counts.get(op, 0) + 1
    return counts


def run_batches(runner, x, batch):
    parts = []
    for first in range(0, len(x["ids"]), batch):
        out = runner(**{k: v[first : first + batch] for k, v in x.items()})
        parts.append(np.asarray(out["logits"], np.float32))
    return np.concatenate(parts)


def convert_variant(how, row, saved_model, calibration):
    """The flatbuffer of the variant `how`; what the conversion was goes in row["conversion"]."""
    from keras_bert_impl.conversion import tflite_converter

    if how[0] == "plain_full_int8":
        row["conversion"] = (
            "tf.lite.TFLiteConverter: TFLITE_BUILTINS, optimizations=[DEFAULT], representative_dataset"
        )
        return plain_full_int8(saved_model, calibration)
    _, quantization, quantized_ops, float_nodes = how
    row["conversion"] = {"quantization": quantization}
    if quantization == "int8_mixed":
        quantized_ops = tflite_converter.INT8_MIXED_QUANTIZED_OPS if quantized_ops is None else quantized_ops
        float_nodes = tflite_converter.INT8_MIXED_FLOAT_NODES if float_nodes is None else float_nodes
        row["conversion"].update(quantized_ops=list(quantized_ops), float_nodes=list(float_nodes))
    return tflite_converter.convert_saved_model(
        saved_model,
        quantization,
        calibration if quantization == "int8_mixed" else None,
        quantized_ops=quantized_ops,
        float_nodes=float_nodes,
    )


def time_batch1(interpreters, x, n):
    """Seconds per call of each runner on the first `n` examples one at a time, every runner on each
    example in an order rotated per example (after one warm-up call each)."""
    timed = list(interpreters)
    seconds = {name: [] for name in timed}
    for name in timed:  # warm-up: first-call allocation and delegate set-up
        interpreters[name](**{k: v[:1] for k, v in x.items()})
    for i in range(n):
        example = {k: v[i : i + 1] for k, v in x.items()}
        for j in range(len(timed)):
            name = timed[(i + j) % len(timed)]
            start = time.perf_counter()
            interpreters[name](**example)
            seconds[name].append(time.perf_counter() - start)
    return seconds


def print_table(rows, keras_accuracy):
    print(f"\n{'variant':26} {'MB':>6} {'agree':>7} {'acc':>7} {'max|dl|':>8} {'p50 ms':>7} {'conv s':>7}")
    print(f"{'keras':26} {'':>6} {'':>7} {keras_accuracy:7.4f}")
    for name, row in rows.items():
        if "conversion_error" in row:
            print(f"{name:26} conversion failed")
            continue
        print(
            f"{name:26} {row['size_bytes'] / 1e6:6.1f} {row['top_label_agreement']:7.4f} "
            f"{row['accuracy']:7.4f} {row['max_abs_logit_difference']:8.3f} {row['batch1_p50_ms']:7.2f} "
            f"{row['conversion_seconds']:7.1f}"
        )


def parse_args(argv):
    """(args, every variant, the chosen names), checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--output",
        default="bench/results/full_int8_denylist.json",
        help="Results file. Default bench/results/full_int8_denylist.json.",
    )
    parser.add_argument("--model", default=MODEL, help=f"Fine-tuned classifier. Default {MODEL} (make demo).")
    parser.add_argument(
        "--train", default=TRAIN, help="Training split (calibration sentences). Default make demo's."
    )
    parser.add_argument("--validation", default=VALIDATION, help="Held-out split. Default make demo's.")
    parser.add_argument(
        "--work",
        default=os.path.join(WORK, "full_int8_denylist"),
        help=(
            "Folder for the token-id SavedModel (rewritten every run). Default data/bench/full_int8_denylist."
        ),
    )
    parser.add_argument(
        "--calibration-examples",
        type=int,
        default=200,
        help="The first N training sentences calibrate the full-int8 variants. Default 200.",
    )
    parser.add_argument(
        "--validation-examples",
        type=int,
        default=None,
        help="Score the first N validation sentences only. Default all.",
    )
    parser.add_argument(
        "--latency-examples",
        type=int,
        default=50,
        help="Sentences timed one at a time (batch 1), every variant on each. Default 50.",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        default=None,
        metavar="NAME",
        help="A subset of the variants, in this order. Default all.",
    )
    parser.add_argument(
        "--note", action="append", default=[], help="A note on this run for the results file (repeatable)."
    )
    args = parser.parse_args(argv)
    missing = [p for p in (args.model, args.train, args.validation) if not os.path.exists(p)]
    if missing:
        sys.exit(
            f"error: {', '.join(missing)} missing. This experiment measures the model make demo fine-tunes "
            "and its split: run `make demo` first (or pass --model, --train and --validation)."
        )
    for flag, value in (
        ("--calibration-examples", args.calibration_examples),
        ("--validation-examples", args.validation_examples or 1),
        ("--latency-examples", args.latency_examples),
    ):
        if value < 1:
            parser.error(f"{flag} must be >= 1. Received: {value}")
    all_variants = variants()
    chosen = args.variants or list(all_variants)
    unknown = [v for v in chosen if v not in all_variants]
    if unknown:
        parser.error(f"unknown --variants {unknown}; choose from {list(all_variants)}")
    return args, all_variants, chosen


def main(argv=None):
    args, all_variants, chosen = parse_args(argv)
    machine = machine_info()

    import keras
    import tensorflow as tf

    import keras_bert_impl  # noqa: F401  registers the model classes for load_model
    from ai_edge_litert.interpreter import Interpreter
    from keras_bert_impl_export.exporter import id_examples, tokenize
    from keras_bert_impl_export.export_signatures import ExportSignatures

    machine.update(tensorflow_threads())
    model = keras.saving.load_model(args.model)
    serving = ExportSignatures(model, SEQUENCE_LENGTH)
    label_names = list(model.label_names)
    train_texts, _ = read_split(args.train)
    texts, label_strings = read_split(args.validation)
    if args.validation_examples:
        texts, label_strings = texts[: args.validation_examples], label_strings[: args.validation_examples]
    bad = sorted(set(label_strings) - set(label_names))
    if bad:
        sys.exit(
            f"error: {args.validation} has labels {bad} the model does not know (its labels: {label_names})."
        )
    labels = np.array([label_names.index(s) for s in label_strings])
    calibration_texts = train_texts[: args.calibration_examples]
    calibration = id_examples(serving, calibration_texts)
    x = tokenize(serving, texts)
    print(
        f"{len(texts)} validation sentences, {len(calibration)} calibration sentences, {SEQUENCE_LENGTH} "
        "tokens",
        flush=True,
    )

    keras_logits = np.concatenate(
        [
            serving.id_outputs(*(tf.constant(x[k][i : i + 64]) for k in EXPORT_ID_INPUTS))["logits"].numpy()
            for i in range(0, len(texts), 64)
        ]
    )
    keras_top = keras_logits.argmax(-1)
    keras_accuracy = float(np.mean(keras_top == labels))
    print(f"Keras: accuracy {keras_accuracy:.4f}", flush=True)

    saved_model = os.path.join(args.work, "saved_model_ids")
    if os.path.exists(saved_model):
        shutil.rmtree(saved_model)
    os.makedirs(args.work, exist_ok=True)
    serving.export_archive(text=False).write_out(saved_model, verbose=False)

    rows, interpreters, float_ops = {}, {}, None
    for name in chosen:
        description, how = all_variants[name]
        print(f"== {name}: {description}", flush=True)
        row = {"description": description}
        start = time.perf_counter()
        try:
            flatbuffer = convert_variant(how, row, saved_model, calibration)
        except Exception as error:  # a variant the converter refuses is a result too
            row["conversion_error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:500]}"
            row["conversion_seconds"] = time.perf_counter() - start
            print(f"  conversion failed: {row['conversion_error']}", flush=True)
            rows[name] = row
            continue
        row["conversion_seconds"] = time.perf_counter() - start
        row["size_bytes"] = len(flatbuffer)
        interpreter = Interpreter(model_content=flatbuffer)
        row["ops"] = op_census(interpreter)
        if name == "float32":
            names = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
            float_ops = [
                (op["op_name"], names[op["outputs"][0]])
                for op in interpreter._get_ops_details()
                if len(op["outputs"])
            ]
        if (
            float_ops is not None
            and isinstance(row["conversion"], dict)
            and "float_nodes" in row["conversion"]
        ):
            row["float_nodes_matched"] = float_node_matches(
                float_ops, row["conversion"]["quantized_ops"], row["conversion"]["float_nodes"]
            )
        runner = interpreter.get_signature_runner("serving_default")
        logits = run_batches(runner, x, QUALITY_BATCH)
        top = logits.argmax(-1)
        row.update(
            top_label_agreement=float(np.mean(top == keras_top)),
            disagreements=int(np.sum(top != keras_top)),
            accuracy=float(np.mean(top == labels)),
            max_abs_logit_difference=float(np.max(np.abs(logits - keras_logits))),
            mean_abs_logit_difference=float(np.mean(np.abs(logits - keras_logits))),
        )
        print(
            f"  {row['size_bytes'] / 1e6:.1f} MB, converted in {row['conversion_seconds']:.1f} s; agreement "
            f"{row['top_label_agreement']:.4f}, accuracy {row['accuracy']:.4f}, max |dlogit| "
            f"{row['max_abs_logit_difference']:.3g}",
            flush=True,
        )
        rows[name] = row
        # A fresh interpreter for timing, with its own single-example runner.
        interpreters[name] = Interpreter(model_content=flatbuffer).get_signature_runner("serving_default")

    timed = list(interpreters)
    n = min(args.latency_examples, len(texts))
    load_before = read_loadavg()
    seconds = time_batch1(interpreters, x, n)
    load_after = read_loadavg()
    reference = seconds.get("float32")
    for name in timed:
        s = np.array(seconds[name])
        rows[name]["batch1_p50_ms"] = 1000 * float(np.percentile(s, 50))
        rows[name]["batch1_p90_ms"] = 1000 * float(np.percentile(s, 90))
        if reference:
            # Paired: the same sentence, the same moment's load.
            rows[name]["batch1_paired_median_ratio_to_float32"] = float(np.median(s / np.array(reference)))
    print_table(rows, keras_accuracy)

    notes = [
        f"Latency: batch 1, {n} validation sentences, one call of every variant per sentence in rotating "
        f"order, ai_edge_litert Interpreter with its defaults (XNNPACK CPU delegate) on {NPROC} cores; "
        "other processes on the machine slow every variant alike, so compare the ratios "
        "(batch1_paired_median_ratio_to_float32), not the absolute milliseconds.",
        f"Quality: all variants on the same {len(texts)} validation sentences in batches of {QUALITY_BATCH} "
        "(the export report's batch), logits compared with the Keras model's (batches of 64).",
        "ops: per TFLite op kind, the ops the model runs and how many of them output int8 (quantized "
        "activations; dynamic_int8's hybrid ops take int8 weights but output float). float_nodes_matched: "
        "how many nodes of the quantized kinds the float_nodes patterns keep float, counted on the float32 "
        "model as convert() counts them.",
        *args.note,
    ]
    write_report(
        args.output,
        "Full-integer int8 TFLite of make demo's MiniLM MR classifier: which ops to quantize (size, "
        "agreement with Keras, accuracy, batch-1 latency)",
        {
            "settings": {
                "model": os.path.relpath(args.model),
                "validation": os.path.relpath(args.validation),
                "validation_examples": len(texts),
                "calibration": os.path.relpath(args.train),
                "calibration_examples": len(calibration),
                "sequence_length": SEQUENCE_LENGTH,
                "quality_batch": QUALITY_BATCH,
                "latency_examples": n,
                "label_names": label_names,
            },
            "keras": {"accuracy": keras_accuracy},
            "variants": rows,
            "latency_load": {"before": load_before, "after": load_after},
            "warnings": load_warnings(load_before, load_after, "the paired ratios"),
            "notes": notes,
        },
        machine,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
