"""Where ours loses to ONNX Runtime on a CPU, op by op, and what each lever gives: batch-32
forwards of the cpu_peers classifier on the batches the 4,000 MR sentences actually get.

    .venv/bin/python -m bench.perf.forward_gap --peers-python .venv-peers/bin/python \\
        --output bench/results/forward_gap.json

The model and sentences are cpu_peers' (its preparation makes them when missing: the MiniLM
fine-tuned on the demo's 3,200 training sentences, its Hugging Face export, ONNX Runtime's
artifacts from classify_peers). The batches are ours: `TextPredictor.batches` (tokenized at
128, sorted by length, batches of 32 each cut to its longest row), made once and saved, so
every side runs the very same int32 ids (int64 for ONNX Runtime, converted before timing).
Only the forwards are timed: no tokenization, no sorting.

Every contender is a warm child process (cpu_peers' protocol), asked for one pass over all
batches per round, in an order rotated each round; the labels of its last pass give its
accuracy on the 800 held-out sentences. Ratios are per round, against the same round's
baseline: ours fp32 for the fp32 levers, ours int8 for the int8 ones, and ours over the
ONNX Runtime peer of the same precision.

The contenders (`--contenders`, CONTENDERS):
- ours_fp32: the forward `TextPredictor(precision="fp32")` runs (a tf.function, free shapes;
  since issue 33's OneDnnForms, the classifier's function in those forms).
- ours_fp32_keras_graph: the Keras model itself in that tf.function (what fp32 ran before).
- ours_int8: `LiteRtForward` (TFLite dynamic-range int8 on XNNPACK), `precision="int8"`.
- levers on fp32: ours_fp32_xla (the same function with jit_compile=True: XLA compiles each
  batch shape once, in the warm-up pass, whose seconds are recorded); ours_fp32_frozen (the
  concrete function with its variables folded into constants: grappler folds what depends on
  weights alone, and oneDNN's matmuls, marked is_filter_const, reorder their weights once into
  the blocked layout of its brgemm kernels); ours_fp32_frozen_weights, ours_fp32_caller_thread,
  ours_fp32_system_allocator (TensorFlow's oneDNN switches in ENVIRONMENT); ours_fp32_fused_qkv
  (the query, key and value projections as one [H, 3H] matmul, `_fused_projections`); ours_fp32_inter1
  and ours_fp32_intra1 (TensorFlow's inter-/intra-op thread pools at 2/1 and 1/1 instead of
  its default 2/2); ours_fp32_onednn_off (TF_ENABLE_ONEDNN_OPTS=0: Eigen's kernels, what
  TensorFlow 2.20 runs by itself on a CPU without AVX512-VNNI, AVX512-BF16, AVX-VNNI or AMX;
  keras_bert_impl's __init__ turns oneDNN on for every x86 CPU since this bench measured
  that lever, and `onednn_on` in each child's facts says which ran);
  ours_litert_fp32 (the classifier's float32 .tflite through the library's conversion, on
  XNNPACK at 2 threads, resized to each batch: `LiteRtForward(quantization="float32")`);
  ours_fp32_jax (the same .keras on Keras' JAX backend, in `make backend-venvs`' .venv-jax:
  the Keras graph through `stateless_call`, jitted, so XLA:CPU compiles each batch shape once in the
  warm-up pass and fuses the elementwise ops; JAX's CPU threads are its own, not capped at 2).
- the peers: onnxruntime_fp32 (BERT fusions), onnxruntime_int8 and
  onnxruntime_int8_per_channel (quantize_dynamic), as classify_peers makes and runs them.

Beside the forwards (`pass_without_forward_seconds`, 3 interleaved tries): the rest of
cpu_peers' whole pass over the 4,000 sentences, timed as that pass with a forward that does
nothing: ours `TextPredictor.predict` (the traced tokenizer, sorting, cutting, reordering),
ONNX Runtime's `classify_peers.classify` (the Rust tokenizer, sorting, padding to int64).

Where the time goes (`profiles`): each child profiles every PROFILE_EVERY-th batch once
after the rounds: ours with TensorFlow's profiler (op events by node, bench/perf/
inference_throughput.py's `tf_op_ms`), ONNX Runtime with its own (`enable_profiling`,
the "Node" kernel-time events). ms per forward (the sampled batches' mean) by category
(CATEGORIES), and by op. LiteRT (ours int8, ours_litert_fp32) has no per-op profiler in
its Python package: only its wall time. The fp32 matmul ceiling is inference_throughput's:
a 2048^3 tf.matmul in the same process (before and after the rounds, the better kept) and
the multiply-adds the batches execute; share = forward sentences/s / ceiling. Measured in
each PEAK child (oneDNN's matmul and Eigen's; the LiteRT children measure LiteRT's own
[2048, 2048] product in their quantization, `litert_matmul_peak`: XNNPACK's float32 kernels for
ours_litert_fp32, its dynamic-range int8 ones for ours_int8, in GOP/s under the same key):
`share_of_fp32_ceiling` is against ours_fp32's, `share_of_own_ceiling` each PEAK child's against
its own (ours_int8's against the int8 product: the issue's "int8 against its own int8 matmul
ceiling").
"""

import argparse
import collections
import json
import os
import re
import sys
import tempfile
import time

import numpy as np

from bench.common import REPO, WORK, machine_info, wait_for_idle, write_report
from bench.perf.cpu_peers import FOLDER, _Child, _prepare, _summary, interleaved_passes

BATCHES = os.path.join(FOLDER, "forward_gap_batches.npz")
THREADS = 2
PROFILE_EVERY = 5
TOP_NODES = 20
TOKENIZE_ROUNDS = 3
ORT = ("onnxruntime_fp32", "onnxruntime_int8", "onnxruntime_int8_per_channel")
# The levers' environment; everything else is set inside the child.
# keras_bert_impl turns TensorFlow's oneDNN kernels on for every x86 CPU (its __init__.py); this
# contender runs TensorFlow's own default on a CPU without VNNI, BF16 or AMX: Eigen's kernels.
# The oneDNN switches TensorFlow reads once per process (core/util/onednn_env_vars.cc): weights
# taken as constants (each matmul reorders its weights once into oneDNN's blocked layout and keeps
# them: brgemm kernels in place of the plain-layout gemm; only for a process that never trains),
# the caller's thread working in oneDNN's thread pool, the system allocator for oneDNN's buffers.
ENVIRONMENT = {
    "ours_fp32_onednn_off": {"TF_ENABLE_ONEDNN_OPTS": "0"},
    "ours_fp32_jax": {"KERAS_BACKEND": "jax"},
    "ours_fp32_frozen_weights": {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"},
    "ours_fp32_caller_thread": {"TF_ONEDNN_THREADPOOL_USE_CALLER_THREAD": "1"},
    "ours_fp32_system_allocator": {"TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1"},
}
# The children that measure their matmul ceiling in their own process: TensorFlow's fp32 product
# (oneDNN's and Eigen's), LiteRT's float32 and dynamic-range int8 one (litert_matmul_peak).
PEAK = ("ours_fp32", "ours_fp32_onednn_off", "ours_litert_fp32", "ours_int8")
# TensorFlow's (intra-op, inter-op) threads where a lever sets them.
THREAD_POOLS = {"ours_fp32_inter1": (2, 1), "ours_fp32_intra1": (1, 1)}
OURS = (
    "ours_fp32",
    "ours_fp32_keras_graph",
    "ours_fp32_xla",
    "ours_fp32_frozen",
    "ours_fp32_frozen_weights",
    "ours_fp32_caller_thread",
    "ours_fp32_system_allocator",
    "ours_fp32_fused_qkv",
    "ours_fp32_inter1",
    "ours_fp32_intra1",
    "ours_fp32_onednn_off",
    "ours_litert_fp32",
    "ours_fp32_jax",
    "ours_int8",
)
CONTENDERS = OURS + ORT
# What each contender is compared with, per round.
BASELINE = {
    **{name: "ours_fp32" for name in OURS if name != "ours_int8"},
    "ours_int8": None,
    "onnxruntime_fp32": "ours_fp32",
    "onnxruntime_int8": "ours_int8",
    "onnxruntime_int8_per_channel": "ours_int8",
}
BASELINE["ours_fp32"] = None
ORT_ATTENTION = "attention (ORT fused: Q/K/V projection, scores, softmax, context)"
CATEGORIES = (
    "matmuls/FC",
    "attention Q/K/V projection",
    ORT_ATTENTION,
    "attention batch-matmuls",
    "softmax",
    "LayerNorm",
    "GELU",
    "adds/bias",
    "mask",
    "transposes/reshapes",
    "gather/embedding",
    "quantize (activations)",
    "other",
)


# --- the batches ------------------------------------------------------------------------------


def _make_batches(run, sentences, path):
    """Our batches of the sentences, saved as rows_i / token_ids_i / segment_ids_i / padding_mask_i."""
    import keras

    from keras_bert_impl.tensor_names import MODEL_ID_INPUTS
    from keras_bert_impl.inference import TextPredictor

    with open(sentences, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    predictor = TextPredictor(
        keras.saving.load_model(os.path.join(run, "model.keras")), sequence_length=128, batch_size=32
    )
    arrays = {}
    for i, (rows, *ids) in enumerate(predictor.batches(texts)):
        arrays[f"rows_{i}"] = rows
        for name, value in zip(MODEL_ID_INPUTS, ids):
            arrays[f"{name}_{i}"] = value
    folder = os.path.dirname(path)
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".npz", delete=False) as f:
        np.savez(f, count=len(texts), **arrays)
    os.replace(f.name, path)


def _load_batches(path):
    """(sentences, [(rows, token_ids, segment_ids, padding_mask)])."""
    with np.load(path) as data:
        n = sum(1 for k in data.files if k.startswith("rows_"))
        return int(data["count"]), [
            tuple(data[f"{k}_{i}"] for k in ("rows", "token_ids", "segment_ids", "padding_mask"))
            for i in range(n)
        ]


# --- the children -----------------------------------------------------------------------------


def _categorize_tf(node, kind):
    scope = node.lower()
    # By scope in the Keras graph; in OneDnnForms (no layer scopes) by the fused kernel.
    if "layer_norm" in scope or kind in ("_MklLayerNorm", "FusedBatchNormV3"):
        return "LayerNorm"
    if "BatchMatMul" in kind:
        return "attention batch-matmuls"
    if "MatMul" in kind:
        # The fused Q/K/V projection (attend_flat's ops.matmul, no Dense of its own, so no scope
        # below the encoder block's) is the block's "MatMul", or "add" once oneDNN fused its bias
        # in (ORT's Attention op holds it).
        qkv = re.search(r"transformer_layer_\d+(_\d+)?/(matmul|add)$", scope)
        return "attention Q/K/V projection" if qkv else "matmuls/FC"
    if "Softmax" in kind:
        return "softmax"
    if "gelu" in scope or kind in ("Erf", "Tanh"):
        return "GELU"
    if "Gather" in kind or "embedding" in scope:
        return "gather/embedding"
    if kind in (
        "Transpose",
        "_MklTranspose",
        "Reshape",
        "ConcatV2",
        "Unpack",
        "Pack",
        "ExpandDims",
        "StridedSlice",
        "Squeeze",
    ):
        return "transposes/reshapes"
    if kind in ("Cast", "Sub", "LogicalAnd") or ("attention" in scope and kind == "Mul"):
        return "mask"
    if kind in ("AddV2", "Add", "BiasAdd", "AddN"):
        return "adds/bias"
    return "other"


def _categorize_ort(op):
    if op in ("Attention", "QAttention", "MultiHeadAttention"):
        return ORT_ATTENTION
    if op in (
        "MatMul",
        "FusedMatMul",
        "Gemm",
        "MatMulInteger",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
    ):
        return "matmuls/FC"
    if "LayerNormalization" in op and not op.startswith("Embed"):
        return "LayerNorm"
    if op.startswith("Embed") or op == "Gather":
        return "gather/embedding"
    if "Gelu" in op:
        return "GELU"
    if op == "Softmax":
        return "softmax"
    if op in ("Add", "BiasAdd"):
        return "adds/bias"
    if op in ("Transpose", "Reshape", "Unsqueeze", "Squeeze", "Concat", "Slice"):
        return "transposes/reshapes"
    if op in ("DynamicQuantizeLinear", "QuantizeLinear", "DequantizeLinear"):
        return "quantize (activations)"
    return "other"


def _grouped(per_node, categorize):
    """{(node, op): ms} -> {by_category: {...}, by_op: {...}, total_ms}, rounded."""
    by_category, by_op = collections.defaultdict(float), collections.defaultdict(float)
    for (node, op), ms in per_node.items():
        category = categorize(node, op)
        by_category[category] += ms
        by_op[f"{category} | {op}"] += ms
    top = sorted(per_node.items(), key=lambda kv: -kv[1])[:TOP_NODES]
    return {
        "top_nodes_ms": {f"{node} ({op})": round(ms, 2) for (node, op), ms in top},
        "total_ms": round(sum(by_category.values()), 2),
        "by_category_ms": {c: round(by_category[c], 2) for c in CATEGORIES if c in by_category},
        "by_op_ms": {k: round(v, 2) for k, v in sorted(by_op.items(), key=lambda kv: -kv[1])},
    }


def _serve(forward, count, batches, ready, profile=None, extra=None):
    """cpu_peers' protocol over our batches: 'pass' -> {seconds, labels}; 'profile' ->
    profile(sample); other commands from `extra`; 'done' -> {}."""
    labels = np.zeros(count, np.int64)
    print(json.dumps({"ready": True, **ready}), flush=True)
    for command in sys.stdin:
        command = command.strip()
        if command == "pass":
            start = time.perf_counter()
            for rows, *ids in batches:
                labels[rows] = np.asarray(forward(*ids)).argmax(-1)
            print(json.dumps({"seconds": time.perf_counter() - start, "labels": labels.tolist()}), flush=True)
        elif command == "profile":
            sample = batches[::PROFILE_EVERY]
            print(
                json.dumps(
                    {
                        "profile": None
                        if profile is None
                        else {"sampled_forwards": len(sample), **profile(sample)}
                    }
                ),
                flush=True,
            )
        elif extra and command in extra:
            print(json.dumps(extra[command]()), flush=True)
        elif command == "done":
            print(json.dumps({}), flush=True)
            return 0
    return 0


def litert_matmul_peak(quantization, n=2048, repeats=7, threads=THREADS, inspect=None):
    """GOP/s of one [n, n] x [n, n] product on LiteRT with `threads`, converted in
    `quantization` as our LiteRT forwards are: "dynamic_int8" (int8 weights per output channel,
    the activations quantized per call: XNNPACK's qd8 kernels, ours_int8's ceiling) or
    "float32" (XNNPACK's f32 kernels, ours_litert_fp32's). inference_throughput.matmul_peak is
    the same measurement for TensorFlow's fp32 (ours_fp32's ceiling). `inspect(flatbuffer)`, if
    given, sees the converted file (tests/bench/test_forward_gap.py)."""
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from keras_bert_impl.tensor_names import SERVING_ENDPOINT
    from keras_bert_impl.conversion.native_log import native_output_held
    from keras_bert_impl.conversion.tflite_converter import convert_endpoint
    from keras_bert_impl.inference.litert_forward import LITERT_QUANTIZATIONS

    if quantization not in LITERT_QUANTIZATIONS:
        raise ValueError(
            f"quantization must be one of {LITERT_QUANTIZATIONS}. Received: quantization={quantization!r}"
        )

    rng = np.random.default_rng(0)
    weights = tf.constant((rng.normal(size=(n, n)) / np.sqrt(n)).astype(np.float32))  # [n, n]

    def product(x):  # x [n, n]: a constant right-hand side converts to one FULLY_CONNECTED
        return {"y": tf.matmul(x, weights)}

    flatbuffer = convert_endpoint(product, [tf.TensorSpec([n, n], tf.float32, name="x")], quantization)
    if inspect is not None:
        inspect(flatbuffer)
    x = rng.normal(size=(n, n)).astype(np.float32)
    with native_output_held():  # XNNPACK says it is applied on the first run
        runner = Interpreter(model_content=flatbuffer, num_threads=threads).get_signature_runner(
            SERVING_ENDPOINT
        )
        runner(x=x)
    times = [_timed(lambda: runner(x=x)) for _ in range(repeats)]
    return 2 * n**3 / float(np.median(times)) / 1e9


def _tf_forward(function):
    """(forward, profile) of a TensorFlow function of the three id inputs: logits as numpy, and the
    per-op milliseconds of a sample of batches, grouped."""
    import tensorflow as tf

    from bench.perf.inference_throughput import tf_op_ms

    def forward(*ids):
        return function(*(tf.constant(a) for a in ids))["logits"].numpy()

    def profile(sample):
        per_node = tf_op_ms(lambda: [forward(*ids) for _, *ids in sample], 1)
        return _grouped(
            {key: ms / len(sample) for key, ms in per_node.items()}, lambda n, o: _categorize_tf(n, o)
        )

    return forward, profile


def _warm_up(forward, batches):
    for _, *ids in batches:  # every shape once (XLA compiles each here)
        forward(*ids)


def _child_setup(backbone, count, batches):
    """What a child of ours reports of its set-up: oneDNN, the forward's GFLOP per sentence over
    `batches`, TensorFlow's thread pools and the environment that sets them."""
    import tensorflow as tf

    from bench.perf.cpu_peers import onednn_on
    from bench.perf.inference_throughput import forward_flop

    return {
        "onednn_on": onednn_on(),
        "gflop_per_sentence": forward_flop(backbone, [(len(r), ids.shape[1]) for r, ids, _, _ in batches])
        / count
        / 1e9,
        "tf_threads": [
            tf.config.threading.get_intra_op_parallelism_threads(),
            tf.config.threading.get_inter_op_parallelism_threads(),
        ],
        "environment": {
            k: os.environ.get(k)
            for k in sorted({"TF_ENABLE_ONEDNN_OPTS", *(k for v in ENVIRONMENT.values() for k in v)})
        },
    }


def ours_child(name, run, batches_path):
    """One of our forwards (the module docstring's contenders) behind the protocol."""
    # First, as a user's `kbert`: it sets oneDNN's switch before TensorFlow loads.
    import keras_bert_impl  # noqa: F401
    import tensorflow as tf

    if name in THREAD_POOLS:  # before anything runs
        tf.config.threading.set_intra_op_parallelism_threads(THREAD_POOLS[name][0])
        tf.config.threading.set_inter_op_parallelism_threads(THREAD_POOLS[name][1])
    import keras

    from bench.perf.inference_throughput import matmul_peak
    from keras_bert_impl.inference import LiteRtForward, TextPredictor
    from keras_bert_impl.tensor_names import MODEL_ID_INPUTS

    count, batches = _load_batches(batches_path)
    model = keras.saving.load_model(os.path.join(run, "model.keras"))
    start = time.perf_counter()
    litert = None
    if name == "ours_int8":
        litert = LiteRtForward(model, num_threads=THREADS)
    elif name == "ours_litert_fp32":
        litert = LiteRtForward(model, num_threads=THREADS, quantization="float32")
    if litert is not None:

        def forward(*ids):
            return litert(*ids)["logits"]

        profile = None
    else:
        if name == "ours_fp32_fused_qkv":
            from keras_bert_impl.models import integer_forms

            integer_forms._projections = _fused_projections  # in this child's process only
        function = TextPredictor(model, sequence_length=128, batch_size=32)._forward  # what predict runs
        if name == "ours_fp32_keras_graph":
            spec = tf.TensorSpec([None, None], tf.int32)
            function = tf.function(
                lambda *ids: model(dict(zip(MODEL_ID_INPUTS, ids)), training=False),
                input_signature=[spec] * 3,
            )
        elif name == "ours_fp32_xla":
            spec = tf.TensorSpec([None, None], tf.int32)
            function = tf.function(function.python_function, input_signature=[spec] * 3, jit_compile=True)
        elif name == "ours_fp32_frozen":
            from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

            concrete = function.get_concrete_function()
            frozen = convert_variables_to_constants_v2(concrete)

            def function(*ids):
                return tf.nest.pack_sequence_as(concrete.structured_outputs, frozen(*ids))

        forward, profile = _tf_forward(function)

    build_seconds = time.perf_counter() - start
    start = time.perf_counter()
    _warm_up(forward, batches)
    warm_up = time.perf_counter() - start
    ready = {
        "build_seconds": build_seconds,
        "warm_up_pass_seconds": warm_up,
        **_child_setup(model.backbone, count, batches),
    }
    with open(os.path.join(FOLDER, "mr_sentences.txt"), encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    # Everything of `predict` but the forward: tokenizing, sorting, cutting, putting back in order.
    idle = TextPredictor(model, sequence_length=128, batch_size=32)
    idle._forward = lambda token_ids, *_: {"logits": np.zeros((len(token_ids), 2), np.float32)}
    # Each forward's own ceiling: TensorFlow's fp32 product, or LiteRT's in the forward's quantization.
    peak = {
        "ours_int8": lambda: litert_matmul_peak("dynamic_int8"),
        "ours_litert_fp32": lambda: litert_matmul_peak("float32"),
    }.get(name, lambda: matmul_peak("float32"))
    extra = {
        "peak": lambda: {"matmul_2048_gflop_per_s": peak()},
        "tokenize": lambda: {"seconds": _timed(lambda: idle.predict(texts))},
    }
    return _serve(forward, count, batches, ready, profile, extra)


def _fused_projections(forms, name, attention, x, length, source=None):
    """ours_fp32_fused_qkv: `integer_forms._projections` as one [H, 3H] product (the kernels and
    biases concatenated in the graph, each call) and three slices, in place of three [H, H] ones.
    `source` (the QAT grid x is on) has no part in the float forms this lever runs in."""
    from keras import ops

    heads, head_dim = attention.num_heads, attention.head_dim
    dense = (attention.query_dense, attention.key_dense, attention.value_dense)
    kernel = ops.concatenate([forms.kernel(d.kernel) for d in dense], axis=1)  # [H, 3H]
    bias = ops.concatenate([forms.weight(d.bias) for d in dense], axis=0)  # [3H]
    y = ops.reshape(ops.add(ops.matmul(x, kernel), bias), (-1, length, 3, heads, head_dim))  # [B, S, 3, N, D]
    scale = 1.0 / float(head_dim) ** 0.5
    query = ops.transpose(y[:, :, 0], (0, 2, 1, 3)) * scale  # [B, N, S, D]
    return query, ops.transpose(y[:, :, 1], (0, 2, 3, 1)), ops.transpose(y[:, :, 2], (0, 2, 1, 3))


def jax_child(run, batches_path):
    """ours_fp32_jax: the classifier's Keras graph on the JAX backend (KERAS_BACKEND=jax from
    ENVIRONMENT), one jitted `stateless_call` compiled per batch shape in the warm-up pass."""
    import jax
    import keras

    import keras_bert_impl  # noqa: F401  (registers the layers for load_model)

    count, batches = _load_batches(batches_path)
    model = keras.saving.load_model(os.path.join(run, "model.keras"))
    start = time.perf_counter()
    trainable = [v.value for v in model.trainable_variables]
    frozen = [v.value for v in model.non_trainable_variables]

    @jax.jit
    def logits(trainable, frozen, token_ids, segment_ids, padding_mask):
        inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        return model.stateless_call(trainable, frozen, inputs, training=False)[0]["logits"]

    def forward(*ids):
        return np.asarray(logits(trainable, frozen, *ids))

    build_seconds = time.perf_counter() - start
    start = time.perf_counter()
    for _, *ids in batches:  # every shape compiled once here
        forward(*ids)
    ready = {
        "build_seconds": build_seconds,
        "warm_up_pass_seconds": time.perf_counter() - start,
        "distinct_shapes": len({ids.shape for _, ids, _, _ in batches}),
        "versions": {"jax": jax.__version__, "keras": keras.__version__},
        "devices": str(jax.devices()),
    }
    return _serve(forward, count, batches, ready)


def ort_child(name, hf, batches_path):
    """An ONNX Runtime peer, as classify_peers makes and runs it, on our batches."""
    from bench.reference import classify_peers

    work = os.path.join(WORK, "peers", classify_peers._fingerprint(hf))
    os.makedirs(work, exist_ok=True)
    prepared = classify_peers.prepare(name, hf, work, THREADS, None)
    count, batches = _load_batches(batches_path)
    feeds = [
        (
            rows,
            {
                "input_ids": ids.astype(np.int64),
                "token_type_ids": segments.astype(np.int64),
                "attention_mask": mask.astype(np.int64),
            },
        )
        for rows, ids, segments, mask in batches
    ]
    session = classify_peers.ort_session(name, work, THREADS)

    def forward(feed):
        return session.run(["logits"], feed)[0]

    def profile(sample):
        with tempfile.TemporaryDirectory() as folder:
            profiled = classify_peers.ort_session(
                name, work, THREADS, profile_prefix=os.path.join(folder, "ort")
            )
            for _, feed in sample[:2]:  # its own warm-up, kept out of the sums below
                profiled.run(["logits"], feed)
            with open(profiled.end_profiling(), encoding="utf-8") as f:
                warm_events = len(json.load(f))
            profiled = classify_peers.ort_session(
                name, work, THREADS, profile_prefix=os.path.join(folder, "ort2")
            )
            for _, feed in sample[:2]:
                profiled.run(["logits"], feed)
            for _, feed in sample:
                profiled.run(["logits"], feed)
            with open(profiled.end_profiling(), encoding="utf-8") as f:
                events = json.load(f)
        per_node = collections.defaultdict(float)
        for event in events[warm_events:]:
            if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
                per_node[(event["name"], event["args"]["op_name"])] += event["dur"] / 1e3 / len(sample)
        return _grouped(per_node, lambda n, o: _categorize_ort(o))

    for _, feed in feeds:  # warm-up
        forward(feed)
    with open(os.path.join(FOLDER, "mr_sentences.txt"), encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    tokenizer = classify_peers._tokenizer(hf, 128)

    def idle(batch):
        return np.zeros((len(batch["input_ids"]), 2), np.float32)

    # Everything of the peers' pass but the forward
    # (classify_peers.classify with a forward that does nothing).
    extra = {
        "tokenize": lambda: {
            "seconds": _timed(lambda: classify_peers.classify(idle, tokenizer, texts, 32, 0))
        }
    }
    return _serve(forward, count, feeds, {"prepare_seconds": prepared["seconds"]}, profile, extra)


def _timed(call):
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


# --- the parent -------------------------------------------------------------------------------


def run_child(name, model):
    """The child process of contender `name` (this script run with --child)."""
    if name in ORT:
        return ort_child(name, model, BATCHES)
    if name == "ours_fp32_jax":
        return jax_child(model, BATCHES)
    return ours_child(name, model, BATCHES)


def tokenize_rounds(children):
    """Seconds of a whole pass but the forward, per round, on the sides whose pipelines differ."""
    tokenize = {}
    for _ in range(TOKENIZE_ROUNDS):
        for name in ("ours_fp32", *ORT[:1]):
            if name in children:
                tokenize.setdefault(name, []).append(children[name].ask("tokenize")["seconds"])
    return tokenize


def fp32_ceiling(rows, peaks):
    """Each contender's speed against the fp32 matmul ceiling and against its own."""
    gflop = rows["ours_fp32"]["gflop_per_sentence"]
    limits = {name: max(peak) / gflop for name, peak in peaks.items()}
    median = {name: float(np.median(rows[name]["sentences_per_second"])) for name in rows}
    return {
        "matmul_2048_gflop_per_s": peaks,
        "gflop_per_sentence_executed": gflop,
        "fp32_ceiling_sentences_per_s": limits,
        "share_of_fp32_ceiling": {name: median[name] / limits["ours_fp32"] for name in rows},
        "share_of_own_ceiling": {name: median[name] / limit for name, limit in limits.items()},
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--peers-python", default=os.path.join(REPO, ".venv-peers", "bin", "python"))
    parser.add_argument(
        "--jax-python",
        default=os.path.join(REPO, ".venv-jax", "bin", "python"),
        help="The Python of ours_fp32_jax (Keras with JAX, no TensorFlow).",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help="Comma-separated subset to run.")
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "forward_gap.json"))
    parser.add_argument("--child", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args.child, args.model)
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = sorted(set(contenders) - set(CONTENDERS))
    if unknown or args.rounds < 1:
        raise SystemExit(
            f"--contenders takes a subset of {','.join(CONTENDERS)} (unknown: {unknown}); --rounds >= 1."
        )
    texts, labels, test_idx, run, hf, sentences, _ = _prepare(FOLDER)
    if not os.path.exists(BATCHES) or os.path.getmtime(BATCHES) < os.path.getmtime(
        os.path.join(run, "model.keras")
    ):
        _make_batches(run, sentences, BATCHES)
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)

    children, failed = {}, {}
    for name in contenders:
        python = (
            args.peers_python
            if name in ORT
            else args.jax_python
            if name == "ours_fp32_jax"
            else sys.executable
        )
        env = {**os.environ, **ENVIRONMENT.get(name, {})}
        command = [
            python,
            "-m",
            "bench.perf.forward_gap",
            "--child",
            name,
            "--model",
            hf if name in ORT else run,
        ]
        try:
            children[name] = _Child(name, command, FOLDER, env=env)
        except RuntimeError as error:  # a lever that will not run here is listed with its error
            failed[name] = str(error)
    peaks = {
        name: [children[name].ask("peak")["matmul_2048_gflop_per_s"]] for name in PEAK if name in children
    }
    seconds, predicted = interleaved_passes(children, args.rounds, len(texts))
    for name, peak in peaks.items():
        peak.append(children[name].ask("peak")["matmul_2048_gflop_per_s"])
    profiles = {name: child.ask("profile")["profile"] for name, child in children.items()}
    # The rest of a whole pass (cpu_peers' figure), on the sides whose pipelines differ.
    tokenize = tokenize_rounds(children)
    for child in children.values():
        child.close()

    with open(os.path.join(hf, "config.json"), encoding="utf-8") as f:
        label2id = json.load(f)["label2id"]
    truth = np.array([label2id[str(label)] for label in labels[test_idx]])
    batches = -(-len(texts) // 32)
    rows = {}
    for name, child in children.items():
        per_round = [len(texts) / s for s in seconds[name]]
        rows[name] = {
            "sentences_per_second": per_round,
            "summary": _summary(per_round),
            "ms_per_forward_median": 1000 * float(np.median(seconds[name])) / batches,
            "accuracy_800_held_out": float(np.mean(predicted[name][test_idx] == truth)),
            **{k: v for k, v in child.ready.items() if k != "ready"},
        }
        base = BASELINE.get(name)
        if base in children:
            ratio = [
                a / b for a, b in zip(seconds[base], seconds[name])
            ]  # this one's speed over the baseline's
            rows[name][f"over_{base}"] = {
                "per_round": ratio,
                **_summary(ratio),
                "accuracy_difference": rows[name]["accuracy_800_held_out"]
                - float(np.mean(predicted[base][test_idx] == truth)),
                "labels_equal_to_it": float(np.mean(predicted[name] == predicted[base])),
            }
    ceiling = fp32_ceiling(rows, peaks) if "ours_fp32" in children else None
    results = {
        "sentences": len(texts),
        "held_out": len(test_idx),
        "forwards_per_pass": batches,
        "rounds": args.rounds,
        "threads": THREADS,
        "batch_size": 32,
        "truncation": 128,
        "model": os.path.relpath(run, REPO),
        "contenders": rows,
        "failed": failed,
        "ceiling": ceiling,
        "profiles": profiles,
        "pass_without_forward_seconds": {
            name: {"per_round": v, "median": float(np.median(v))} for name, v in tokenize.items()
        },
        "profile_sample": f"every {PROFILE_EVERY}th batch of the pass, ms per forward (their mean)",
    }
    write_report(args.output, "forward_gap", results, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
