"""Raw MR text -> labels: ours (fp32, bf16, int8) vs PyTorch + transformers vs KerasHub's
BertTextClassifier, MiniLM-L6 shape, the 4,000 MR sentences, 2 threads, one run, alternating;
then where the time goes.

Ours: `TextPredictor` on the fine-tuned MiniLM run (length-sorted batches of 32, each cut to
its longest row, truncation at 128, tokenization included) in fp32, bf16 (`with_precision`)
and int8 (`LiteRtForward`: TFLite dynamic-range int8 on XNNPACK; its conversion is timed
apart, once), and fp32 with widths rounded up to 16 (the earlier default), timed in this
process after a warm-up. KerasHub: `BertTextClassifier` with its
`BertTextClassifierPreprocessor` (in-graph tokenizer, every text padded to its
`sequence_length`: 64 and 128 are measured, "at its best length") on a MiniLM-shaped
backbone with random weights (speed does not depend on them), `predict` in batches of 32.
PyTorch (bench/reference/classify_pytorch.py in .venv-torch): batches of 32 padded to the
longest in each, in file order and sorted by length, `torch.inference_mode()`.

    .venv/bin/python -m bench.perf.inference_throughput --torch-python .venv-torch/bin/python \\
        --output bench/results/inference_throughput.json
"""

import argparse
import os
import sys
import time

import numpy as np

from bench.common import MINILM_VOCAB, WORK, machine_info, run_json_child, wait_for_idle, write_report

RUN = os.path.join(WORK, "distill_mr", "ours-mean-seed0-wu0.0-wd0.0")
SENTENCES = os.path.join(WORK, "distill_mr", "mr_sentences.txt")


def _kerashub_classifier(sequence_length):
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30522,
        num_layers=6,
        num_heads=12,
        hidden_dim=384,
        intermediate_dim=1536,
        max_sequence_length=512,
    )
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=MINILM_VOCAB, lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=sequence_length)
    return keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=preprocessor)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--torch-python", required=True, help="Python of .venv-torch (make .venv-torch/.installed)."
    )
    parser.add_argument("--run", default=RUN)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "inference_throughput.json"))
    args = parser.parse_args(argv)
    for path in (args.run, SENTENCES):
        if not os.path.exists(path):
            raise SystemExit(f"{path}: missing; `make experiment-distill-mr` writes it.")
    import keras
    import tensorflow as tf

    from keras_bert_impl.inference import TextPredictor, with_precision

    with open(SENTENCES, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f if line.strip()]
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)

    model = keras.saving.load_model(os.path.join(args.run, "model.keras"))
    started = time.perf_counter()
    int8 = TextPredictor(model, sequence_length=128, batch_size=32, precision="int8")
    int8_conversion_s = time.perf_counter() - started
    ours = {
        "ours_fp32": TextPredictor(model, sequence_length=128, batch_size=32),
        "ours_fp32_width16": TextPredictor(model, sequence_length=128, batch_size=32, bucket_multiple=16),
        "ours_bf16": TextPredictor(model, sequence_length=128, batch_size=32, precision="bf16"),
        "ours_int8": int8,
    }
    hub = {f"kerashub_len{length}": _kerashub_classifier(length) for length in (64, 128)}
    batches = tf.data.Dataset.from_tensor_slices(texts).batch(32)

    def run_ours(name):
        return ours[name].predict(texts)["logits"].argmax(-1)

    def run_hub(name):
        return hub[name].predict(batches, verbose=0).argmax(-1)

    contenders = {**{n: run_ours for n in ours}, **{n: run_hub for n in hub}}
    for name in contenders:  # warm-up: traces and oneDNN's first kernels
        if name.startswith("ours"):
            ours[name].predict(texts[:256])
        else:
            hub[name].predict(tf.data.Dataset.from_tensor_slices(texts[:256]).batch(32), verbose=0)
    seconds = {name: [] for name in contenders}
    seconds["pytorch_input_order"], seconds["pytorch_length_order"] = [], []
    torch_info = None
    for round_ in range(args.rounds):
        for name, fn in contenders.items():
            started = time.perf_counter()
            fn(name)
            seconds[name].append(time.perf_counter() - started)
            print(f"round {round_}: {name} {len(texts) / seconds[name][-1]:.1f} sentences/s", flush=True)
        for order in ("input", "length"):
            result = run_json_child(
                [
                    args.torch_python,
                    "-m",
                    "bench.reference.classify_pytorch",
                    "--sentences",
                    SENTENCES,
                    "--order",
                    order,
                    "--batch-size",
                    "32",
                    "--seq-len",
                    "128",
                ]
            )
            seconds[f"pytorch_{order}_order"].append(result["seconds"])
            torch_info = {k: result[k] for k in ("torch", "transformers", "attention", "threads")}
    rate = {name: len(texts) / min(values) for name, values in seconds.items()}
    peers = {name: r for name, r in rate.items() if not name.startswith("ours")}
    best_peer = max(peers, key=peers.get)
    flop = _flop_executed(model, ours["ours_fp32"], texts)
    peak = {dtype: matmul_peak(dtype) for dtype in ("float32", "bfloat16")}
    ceiling = peak["float32"] * 1e9 / (flop / len(texts))
    results = {
        "sentences": len(texts),
        "batch_size": 32,
        "truncation": 128,
        "rounds": args.rounds,
        "seconds": {name: [round(s, 3) for s in values] for name, values in seconds.items()},
        "sentences_per_s": {name: round(r, 1) for name, r in rate.items()},
        "fastest_peer": best_peer,
        "ours_fp32_over_fastest_peer": round(rate["ours_fp32"] / peers[best_peer], 3),
        "ours_bf16_over_ours_fp32": round(rate["ours_bf16"] / rate["ours_fp32"], 3),
        "ours_int8_over_ours_fp32": round(rate["ours_int8"] / rate["ours_fp32"], 3),
        "ours_fp32_over_ours_fp32_width16": round(rate["ours_fp32"] / rate["ours_fp32_width16"], 3),
        "int8_conversion_seconds": round(int8_conversion_s, 1),
        "where_the_time_goes": {
            "gflop_per_sentence_executed": round(flop / len(texts) / 1e9, 4),
            "matmul_2048_gflop_per_s": {k: round(v, 1) for k, v in peak.items()},
            "fp32_ceiling_sentences_per_s": round(ceiling, 1),
            "share_of_fp32_ceiling": {name: round(r / ceiling, 3) for name, r in rate.items()},
            "fp32_target_400_needs_gflop_per_s": round(400 * flop / len(texts) / 1e9, 1),
            "forward_32x28_by_op_ms": {
                p: _op_profile(model if p == "fp32" else with_precision(model, p)) for p in ("fp32", "bf16")
            },
        },
        "pytorch": torch_info,
        "targets": {
            "ours_fp32_sentences_per_s": 400,
            "ours_fp32_over_fastest_peer": 2.0,
            "best_low_precision_over_fp32": 2.0,
        },
    }
    for key, value in results.items():
        print(f"{key}: {value}", flush=True)
    write_report(args.output, "inference_throughput", results, machine)
    return 0


def _flop_executed(model, predictor, texts):
    """Multiply-adds x 2 of the fp32 run over `texts`: every batch as TextPredictor cuts it
    (sorted by length, batches of its batch_size, each as wide as its longest row)."""
    lengths = np.sort(np.asarray(predictor._preprocessor(texts)["padding_mask"]).sum(axis=1))[::-1]
    shapes = [
        (len(lengths[s : s + predictor.batch_size]), int(lengths[s : s + predictor.batch_size].max()))
        for s in range(0, len(lengths), predictor.batch_size)
    ]
    return forward_flop(model.backbone, shapes)


def forward_flop(backbone, shapes):
    """Multiply-adds x 2 of a classifier's forwards on batches of `shapes` [(rows, width)]: the
    dense layers per token, attention's two batched products per sequence and the pooler."""
    hidden, inner, layers = backbone.hidden_dim, backbone.intermediate_dim, backbone.num_layers
    per_token = (
        2 * layers * (4 * hidden * hidden + 2 * hidden * inner)
    )  # Q, K, V, output; the feed-forward pair
    return sum(
        rows * (width * per_token + layers * 2 * 2 * width * width * hidden + 2 * hidden * hidden)
        for rows, width in shapes
    )


def matmul_peak(dtype, n=2048, repeats=7):
    import tensorflow as tf

    a = tf.cast(tf.random.normal((n, n)), dtype)
    product = tf.function(lambda: tf.matmul(a, a))
    product()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        product().numpy()
        times.append(time.perf_counter() - started)
    return 2 * n**3 / float(np.median(times)) / 1e9


def _op_profile(model, batch=32, width=28, calls=5):
    """{op type: ms per forward} of one [batch, width] forward, summed over TensorFlow's op
    events in a profiler trace (ops on the two threads may overlap), and the wall time."""
    import collections

    import tensorflow as tf

    ids = tf.constant(np.random.default_rng(0).integers(1000, 2000, (batch, width)), tf.int32)
    x = {"token_ids": ids, "segment_ids": tf.zeros_like(ids), "padding_mask": tf.ones_like(ids)}
    forward = tf.function(lambda x: model(x, training=False))
    for _ in range(3):
        forward(x)
    walls = []
    for _ in range(calls):
        started = time.perf_counter()
        forward(x)["logits"].numpy()
        walls.append(time.perf_counter() - started)
    per_op = collections.defaultdict(float)
    for (_, kind), ms in tf_op_ms(lambda: forward(x)["logits"].numpy(), calls).items():
        per_op[kind] += ms
    top = dict(sorted(per_op.items(), key=lambda kv: -kv[1])[:12])
    matmul = sum(v for k, v in per_op.items() if "MatMul" in k)
    return {
        "wall_ms": round(float(np.median(walls)) * 1e3, 1),
        "matmul_ops_ms": round(matmul, 1),
        "other_ops_ms": round(sum(per_op.values()) - matmul, 1),
        "top_ops_ms": {k: round(v, 2) for k, v in top.items()},
    }


def tf_op_ms(run, calls):
    """{(node name, op type): ms per call} of `run()` called `calls` times under TensorFlow's
    profiler, summed over its op events (ops on the two threads may overlap)."""
    import collections
    import glob
    import tempfile

    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    with tempfile.TemporaryDirectory() as folder:
        tf.profiler.experimental.start(folder)
        for _ in range(calls):
            run()
        tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        with open(glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)[0], "rb") as f:
            space.ParseFromString(f.read())
    per_node = collections.defaultdict(float)
    for plane in space.planes:
        names = {key: value.name for key, value in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                name = names.get(event.metadata_id, "")
                node, _, kind = name.rpartition(":")
                kind = kind.strip()
                # TensorFlow op events are "node:OpType"; the function call and executor events wrap them.
                if node and kind not in ("Process", "Run") and not kind.startswith("__"):
                    per_node[(node, kind)] += event.duration_ps / 1e9 / calls
    return dict(per_node)


if __name__ == "__main__":
    sys.exit(main())
