"""Our model code on a GPU, through Keras 3's JAX backend: BERT-base pretraining steps and a
MiniLM fine-tune on MR, in bf16 mixed precision under XLA (JAX compiles every step).

Made for the lent GPU machine (Python 3.12, JAX with CUDA, no TensorFlow, no Keras, no
network; about 15 minutes a session, start-up included): bench/gpu/run.sh installs the
carried Keras wheels and starts this with KERAS_BACKEND=jax. It runs in phases and writes
the whole results file after each, so a run cut short keeps what it measured; it stops on
its own before --deadline-s (a phase that would start too late is recorded as skipped).

Phases:
- matmul: a bf16 [N, N] x [N, N] product, the card's measured ceiling (median of timed runs).
- pretrain: BertPretrainer (MLM + NSP) on BERT-base at sequence length 128, 20 masked
  positions, bf16 mixed precision, `model.fit` with BERT's AdamW; token ids drawn at random
  (the speed of a step does not depend on their values). Prints step time, tokens/s and
  model FLOPs utilisation (MFU): FLOPs counted from the layer shapes (`train_flops`, 3x the
  forward matmuls: forward + two for the backward pass), against the datasheet's dense bf16
  peak and against the matmul phase's measurement.
- inference: BertBackbone with random weights in two shapes, BERT-base and all-MiniLM-L6-v2's
  (6 layers, H 384, 12 heads), mixed_bfloat16, one jitted stateless call from token ids (numpy on
  the host each call, "raw ids in"; segment ids and the padding mask made on the device), the
  sequence output waited for, not copied back. Batch 1: latency percentiles; batch 256:
  sequences/s. bench/gpu/torch_peer.py times transformers' BertModel the same way.
- finetune: the real all-MiniLM-L6-v2 (bench/gpu/prepare.py's float16 copy) fine-tuned on the
  MR split with the settings of bench/results/finetune_mr_seeds.json (3 epochs, batch 32,
  length 64, lr 5e-5, no warm-up, no weight decay, pooled [CLS]), in bf16; accuracy on the 800
  held-out sentences, per seed, beside that file's seed spread.

--fused-kernels builds the models with `fused_kernels=True` (the Pallas kernels of
keras_bert_impl/kernels/ for LayerNorm + residual + dropout, bias + GELU and the Q/K/V split);
with KBERT_PALLAS_INTERPRET=1 they run on the CPU too, interpreted (the suite's --tiny check).

--tiny runs every phase at toy sizes (bert_tiny, a few steps, a slice of MR) so the suite can
run the script on the JAX CPU backend (tests/bench/test_gpu_bench.py).

    KERAS_BACKEND=jax python -m bench.gpu.gpu_bench --carry bench/gpu/carry --output OUT.json
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

STARTED = time.perf_counter()
SEQ_LEN, PREDICTIONS = 128, 20
# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's datasheets, TFLOP/s.
DATASHEET_BF16_TFLOPS = {
    "H100 SXM": 989.4,
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H200": 989.4,
    "A100": 312.0,
}
SEEDS_FILE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "finetune_mr_seeds.json"
)


def elapsed():
    return time.perf_counter() - STARTED


def datasheet_peak(device_kind):
    """(name, TFLOP/s) of the datasheet entry matching JAX's device_kind, or (None, None)."""
    kind = device_kind.upper()
    if "H100" in kind:
        name = "H100 PCIe" if "PCIE" in kind else "H100 NVL" if "NVL" in kind else "H100 SXM"
    elif "H200" in kind:
        name = "H200"
    elif "A100" in kind:
        name = "A100"
    else:
        return None, None
    return name, DATASHEET_BF16_TFLOPS[name]


def forward_flops(config, batch, seq_len, predictions=None, num_classes=None):
    """Multiply-add FLOPs (2 per MAC) of one forward pass, counted from the layer shapes:
    per layer the Q/K/V/output projections (4 * 2TH^2), the scores and the context (2 * 2T^2H)
    and the feed-forward (2 * 2THI); the pooler (2H^2 per sequence); the masked-LM head on
    `predictions` positions (transform 2H^2 and the tied output 2HV each) and NSP (2 * 2H),
    or a classifier's 2H * num_classes. Embedding lookups, LayerNorm, softmax and GELU are
    not counted (the usual MFU convention: matmul FLOPs only)."""
    h, i, layers, v = (
        config["hidden_dim"],
        config["intermediate_dim"],
        config["num_layers"],
        config["vocabulary_size"],
    )
    t = seq_len
    per_layer = 4 * 2 * t * h * h + 2 * 2 * t * t * h + 2 * 2 * t * h * i
    per_sequence = layers * per_layer + 2 * h * h
    if predictions:
        per_sequence += predictions * (2 * h * h + 2 * h * v) + 2 * 2 * h
    if num_classes:
        per_sequence += 2 * h * num_classes
    return batch * per_sequence


def train_flops(config, batch, seq_len, **kwargs):
    """One training step: the forward pass and a backward pass of twice its FLOPs."""
    return 3 * forward_flops(config, batch, seq_len, **kwargs)


def measure_matmul(size, repeats):
    """Median TFLOP/s of a bf16 [size, size] @ [size, size] under jit, random operands."""
    import jax
    import jax.numpy as jnp

    a, b = (jax.random.normal(jax.random.key(s), (size, size), jnp.bfloat16) for s in (1, 2))
    product = jax.jit(lambda x, y: x @ y)
    product(a, b).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        product(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    seconds = float(np.median(times))
    return {"size": size, "repeats": repeats, "median_s": seconds, "tflops": 2 * size**3 / seconds / 1e12}


def step_times():
    """A Keras callback recording the host time at the end of every training step and the
    start and end of every epoch. Being a callback of our own, Keras runs it synchronously
    and hands it each step's logs as Python floats, so a step's end waits for its result."""
    import keras

    class StepTimes(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.steps, self.epochs = [], []

        def on_train_batch_end(self, batch, logs=None):
            self.steps.append(time.perf_counter())

        def on_epoch_begin(self, epoch, logs=None):
            self.epochs.append([time.perf_counter(), None])

        def on_epoch_end(self, epoch, logs=None):
            self.epochs[-1][1] = time.perf_counter()

    return StepTimes()


def pretrain(args, report, save):
    import keras

    import keras_bert_impl as kb
    from keras_bert_impl.training import create_optimizer

    keras.config.set_dtype_policy("mixed_bfloat16")
    preset = "bert_tiny" if args.tiny else "bert_base"
    seq_len, predictions = (16, 4) if args.tiny else (SEQ_LEN, PREDICTIONS)
    config = dict(kb.BERT_PRESETS[preset])
    config["dropout"] = args.dropout
    config["attention_dropout"] = args.attention_dropout
    config["activation"] = args.activation
    config["fused_kernels"] = args.fused_kernels
    results = report["pretrain"] = {
        "preset": preset,
        "seq_len": seq_len,
        "predictions": predictions,
        "fused_kernels": args.fused_kernels,
        "dropout": args.dropout,
        "attention_dropout": args.attention_dropout,
        "prng": args.prng,
        "dtype_policy": "mixed_bfloat16",
        "mlm_loss": args.mlm_loss,
        "activation": args.activation,
        "data": "token ids drawn at random",
        "runs": [],
    }
    for batch in args.pretrain_batches:
        if elapsed() > args.deadline_s - args.phase_reserve_s:
            results["runs"].append(
                {"batch": batch, "skipped": f"deadline: {elapsed():.0f} s of {args.deadline_s} s"}
            )
            save()
            continue
        keras.utils.set_random_seed(0)
        model = kb.BertPretrainer(kb.BertBackbone(**config))
        steps = args.pretrain_steps
        loss = model.default_loss()
        if args.mlm_loss == "float32":
            loss["mlm_logits"] = float32_mlm_loss()
        model.compile(
            optimizer=create_optimizer(1e-4, train_steps=10_000, warmup_steps=1_000),
            loss=loss,
            weighted_metrics=model.default_weighted_metrics(),
            jit_compile=True,
        )
        rng = np.random.default_rng(0)
        rows = batch * (steps + args.warmup_steps)
        x = {
            "token_ids": rng.integers(1000, config["vocabulary_size"], (rows, seq_len)).astype("int32"),
            "segment_ids": np.repeat(
                np.r_[np.zeros(seq_len // 2), np.ones(seq_len - seq_len // 2)][None], rows, 0
            ).astype("int32"),
            "padding_mask": np.ones((rows, seq_len), "int32"),
            "mask_positions": np.sort(rng.integers(1, seq_len - 1, (rows, predictions)), axis=1).astype(
                "int32"
            ),
        }
        y = {
            "mlm_logits": rng.integers(1000, config["vocabulary_size"], (rows, predictions)),
            "nsp_logits": rng.integers(0, 2, rows),
        }
        w = {"mlm_logits": np.ones((rows, predictions), "float32"), "nsp_logits": np.ones(rows, "float32")}
        times = step_times()
        start = time.perf_counter()
        history = model.fit(
            x, y, sample_weight=w, batch_size=batch, epochs=1, shuffle=False, verbose=0, callbacks=[times]
        )
        total = time.perf_counter() - start
        # Steps after the warm-up ones (the first compiles): host time between step ends.
        timed = np.diff(np.array(times.steps[args.warmup_steps - 1 :]))
        step_s = float(np.median(timed))
        flops = train_flops(config, batch, seq_len, predictions=predictions)
        run = {
            "batch": batch,
            "steps_timed": len(timed),
            "warmup_steps": args.warmup_steps,
            "first_step_s_with_compile": float(times.steps[0] - start),
            "fit_s": total,
            "step_s_median": step_s,
            "step_s_mean": float(np.mean(timed)),
            "step_s_p10_p90": [float(np.percentile(timed, 10)), float(np.percentile(timed, 90))],
            "tokens_per_s": batch * seq_len / step_s,
            "sequences_per_s": batch / step_s,
            "train_flops_per_step": flops,
            "achieved_tflops": flops / step_s / 1e12,
            "final_loss": float(history.history["loss"][-1]),
        }
        peak = report.get("datasheet_bf16_tflops")
        if peak:
            run["mfu_datasheet"] = run["achieved_tflops"] / peak
        measured = (report.get("matmul") or {}).get("tflops")
        if measured:
            run["mfu_measured_matmul"] = run["achieved_tflops"] / measured
        # The same steps again with no callback of ours: Keras then reads no step's logs, JAX
        # queues the next step while one runs, and the host's share of a step shows.
        start = time.perf_counter()
        model.fit(x, y, sample_weight=w, batch_size=batch, epochs=1, shuffle=False, verbose=0)
        run["step_s_fit_without_callbacks"] = (time.perf_counter() - start) / (steps + args.warmup_steps)
        run["mfu_datasheet_without_callbacks"] = (
            (flops / run["step_s_fit_without_callbacks"] / 1e12 / peak) if peak else None
        )
        if args.profile_steps:
            run["profile"] = profile_fit(model, x, y, w, batch, args.profile_steps, args.profile_dir)
        results["runs"].append(run)
        print(
            f"pretrain {preset} batch {batch}: {step_s * 1e3:.1f} ms/step, {run['tokens_per_s']:,.0f} "
            f"tokens/s, {run['achieved_tflops']:.1f} TFLOP/s, MFU "
            f"{run.get('mfu_datasheet', float('nan')):.1%} of the datasheet, "
            f"{run.get('mfu_measured_matmul', float('nan')):.1%} of the measured matmul; "
            f"{run['step_s_fit_without_callbacks'] * 1e3:.1f} ms/step without callbacks",
            flush=True,
        )
        save()
        del model
        keras.backend.clear_session()


INFERENCE_SHAPES = {
    "bert_base": {
        "vocabulary_size": 30522,
        "num_layers": 12,
        "num_heads": 12,
        "hidden_dim": 768,
        "intermediate_dim": 3072,
    },
    "minilm": {
        "vocabulary_size": 30522,
        "num_layers": 6,
        "num_heads": 12,
        "hidden_dim": 384,
        "intermediate_dim": 1536,
    },
}
TINY_INFERENCE_SHAPE = {
    "vocabulary_size": 512,
    "num_layers": 2,
    "num_heads": 2,
    "hidden_dim": 32,
    "intermediate_dim": 64,
}


def jitted_forward(backbone):
    """`backbone`'s stateless forward from token ids to sequence_output, jitted. A closure of its own,
    so `inference` can delete the backbone it holds between models."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def forward(trainable, non_trainable, token_ids):
        x = {
            "token_ids": token_ids,
            "segment_ids": jnp.zeros_like(token_ids),
            "padding_mask": jnp.ones_like(token_ids),
        }
        outputs, _ = backbone.stateless_call(trainable, non_trainable, x, training=False)
        return outputs["sequence_output"]

    return forward


def inference(args, report, save):
    """Batch-1 latency and large-batch throughput of BertBackbone's forward from token ids."""
    import keras

    import keras_bert_impl as kb

    keras.config.set_dtype_policy("mixed_bfloat16")
    shapes = (
        {"tiny": TINY_INFERENCE_SHAPE}
        if args.tiny
        else {n: INFERENCE_SHAPES[n] for n in args.inference_models}
    )
    seq_len = 16 if args.tiny else args.inference_length
    throughput_batch = 8 if args.tiny else args.throughput_batch
    latency_repeats, throughput_repeats = (3, 2) if args.tiny else (200, 20)
    results = report["inference"] = {
        "seq_len": seq_len,
        "dtype_policy": "mixed_bfloat16",
        "fused_kernels": args.fused_kernels,
        "input": "numpy int32 token ids, copied to the device in each timed call",
        "output": "sequence_output, waited for, not copied back",
        "models": {},
    }
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        if elapsed() > args.deadline_s - args.phase_reserve_s:
            results["models"][name] = {"skipped": f"deadline: {elapsed():.0f} s of {args.deadline_s} s"}
            save()
            continue
        keras.utils.set_random_seed(0)
        backbone = kb.BertBackbone(**shape, dropout=0.0, fused_kernels=args.fused_kernels)
        trainable = [v.value for v in backbone.trainable_variables]
        non_trainable = [v.value for v in backbone.non_trainable_variables]
        forward = jitted_forward(backbone)

        entry = results["models"][name] = {"shape": shape}
        for batch, repeats in ((1, latency_repeats), (throughput_batch, throughput_repeats)):

            def ids():
                return rng.integers(1, shape["vocabulary_size"], (batch, seq_len)).astype("int32")

            for _ in range(2):  # the first call compiles
                forward(trainable, non_trainable, ids()).block_until_ready()
            times = []
            for _ in range(repeats):
                token_ids = ids()
                begin = time.perf_counter()
                forward(trainable, non_trainable, token_ids).block_until_ready()
                times.append(time.perf_counter() - begin)
            entry[f"batch_{batch}"] = {
                "repeats": repeats,
                "latency_ms_p50": 1e3 * float(np.median(times)),
                "latency_ms_p90": 1e3 * float(np.percentile(times, 90)),
                "sequences_per_s": batch / float(np.median(times)),
            }
            print(
                f"inference {name} batch {batch}: {entry[f'batch_{batch}']['latency_ms_p50']:.2f} ms p50, "
                f"{entry[f'batch_{batch}']['sequences_per_s']:,.0f} sequences/s",
                flush=True,
            )
        save()
        del backbone, forward
        keras.backend.clear_session()


def float32_mlm_loss():
    """The masked-LM loss as logsumexp(logits) - logits[label], in float32 from the bf16
    logits: one reduction and one gather per position instead of Keras' JAX form
    (log_softmax in the logits' dtype, then a float32 one-hot [B, P, V] times it, summed),
    the same value up to bf16 rounding. A lever measured here before the library takes it."""
    from keras import ops

    from keras_bert_impl.models import MaskedSparseCrossentropy

    class Float32MaskedSparseCrossentropy(MaskedSparseCrossentropy):
        def call(self, y_true, y_pred):
            logits = ops.cast(y_pred, "float32")  # [B, P, V]
            labels = ops.expand_dims(ops.cast(y_true, "int32"), -1)  # [B, P, 1]
            return (
                ops.logsumexp(logits, axis=-1) - ops.take_along_axis(logits, labels, axis=-1)[..., 0]
            )  # [B, P]

    return Float32MaskedSparseCrossentropy()


def use_rbg_dropout_keys():
    """Makes every random draw of Keras' JAX backend use XLA's RngBitGenerator ("unsafe_rbg")
    instead of JAX's default threefry, whose bits cost a GPU many integer operations each.

    Keras keeps its seeds as threefry-shaped uint32[2] states (SeedGenerator) and JAX refuses
    those as keys of another implementation, so jax_default_prng_impl cannot be set; instead
    each drawn [2] state is spread into the uint32[4] key data unsafe_rbg takes. Same-seed
    runs stay reproducible; the masks are a different (still uniform) stream than threefry's.
    """
    import jax
    import jax.numpy as jnp
    from keras.src.backend.jax import random as jax_random

    draw = jax_random.jax_draw_seed

    def draw_rbg(seed):
        state = jnp.asarray(draw(seed), jnp.uint32)  # [2]
        mixed = state * jnp.uint32(0x9E3779B1) ^ jnp.uint32(0x85EBCA77)
        return jax.random.wrap_key_data(jnp.concatenate([state, mixed]), impl="unsafe_rbg")

    jax_random.jax_draw_seed = draw_rbg


def profile_fit(model, x, y, w, batch, steps, folder):
    """Device time per training step by kernel, from JAX's profiler (a Perfetto trace of `steps`
    more fit steps): the kernels' summed durations on the GPU streams, the top 30 by name and
    by kind (matmul: cuBLAS/CUTLASS gemm kernels; the rest XLA's fusions and others)."""
    import glob
    import gzip
    import shutil

    import jax

    folder = os.path.join(folder, f"trace_{batch}")
    shutil.rmtree(folder, ignore_errors=True)
    rows = batch * steps
    part = {key: value[:rows] for key, value in x.items()}
    with jax.profiler.trace(folder, create_perfetto_trace=True):
        model.fit(
            part,
            {k: v[:rows] for k, v in y.items()},
            sample_weight={k: v[:rows] for k, v in w.items()},
            batch_size=batch,
            epochs=1,
            shuffle=False,
            verbose=0,
        )
    traces = glob.glob(os.path.join(folder, "**", "*.trace.json.gz"), recursive=True)
    if not traces:
        return {"error": f"no perfetto trace under {folder}"}
    with gzip.open(traces[0], "rt", encoding="utf-8") as f:
        events = json.load(f)
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    names = {
        e["pid"]: e.get("args", {}).get("name", "")
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    gpu = {pid for pid, name in names.items() if "GPU" in name.upper() or "/device:" in name}
    threads = {
        (e["pid"], e["tid"]): e.get("args", {}).get("name", "")
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") in gpu
    }
    # Kernels run on the "Stream #N" threads; the device's other rows ("XLA Modules", "XLA Ops")
    # span the same time again, and must not be added.
    streams = {key for key, name in threads.items() if "stream" in name.lower()} or set(threads)
    kernels = {}
    for e in events:
        if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) in streams and "dur" in e:
            kernels[e["name"]] = kernels.get(e["name"], 0.0) + e["dur"] / 1e3  # ms
    total = sum(kernels.values())

    def kind(name):
        lower = name.lower()
        if "sdpa" in lower or "cudnn::fusion" in lower:  # cuDNN's fused attention and its helpers
            return "fused_attention"
        if any(tag in lower for tag in ("gemm", "cutlass", "cublas", "matmul", "xmma", "sm90")):
            return "matmul"
        if "fusion" in lower or "loop_" in lower or "input_" in lower:
            return "xla_fusion"
        if "memcpy" in lower or "memset" in lower:
            return "copy"
        return "other"

    kinds = {}
    for name, ms in kernels.items():
        kinds[kind(name)] = kinds.get(kind(name), 0.0) + ms
    top = sorted(kernels.items(), key=lambda item: -item[1])[:30]
    # Every kernel's time, for bench/gpu/attribute_hlo.py to join with the step's HLO.
    from keras_bert_impl.atomic_write import write_json_atomically

    write_json_atomically(
        {name: ms / steps for name, ms in kernels.items()}, os.path.join(folder, "kernels.json")
    )
    return {
        "steps": steps,
        "gpu_processes": sorted(names[p] for p in gpu),
        "gpu_threads": sorted({threads[key] for key in threads}),
        "summed_threads": sorted({threads[k] for k in streams}),
        "kernel_ms_per_step": total / steps,
        "by_kind_ms_per_step": {k: v / steps for k, v in sorted(kinds.items(), key=lambda item: -item[1])},
        "top_kernels_ms_per_step": [[name[:160], ms / steps] for name, ms in top],
    }


def seed_spread():
    """The pooled side's per-seed accuracies of bench/results/finetune_mr_seeds.json (CPU, fp32)."""
    try:
        with open(SEEDS_FILE, encoding="utf-8") as f:
            runs = json.load(f)["sides"]["pooled"]["runs"]
    except (OSError, KeyError, ValueError):
        return None
    values = [run["test_accuracy"] for run in runs.values()]
    return {
        "file": "bench/results/finetune_mr_seeds.json",
        "side": "pooled",
        "accuracies": values,
        "min": min(values),
        "max": max(values),
        "mean": float(np.mean(values)),
    }


def load_minilm(carry, kb, fused_kernels=False):
    """BertBackbone of the carried config, every variable set from the float16 arrays by path."""
    with open(os.path.join(carry, "minilm_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    backbone = kb.BertBackbone(**{**config, "fused_kernels": fused_kernels})
    with np.load(os.path.join(carry, "minilm_fp16.npz")) as arrays:
        paths = {v.path for v in backbone.weights}
        if paths != set(arrays.files):
            raise SystemExit(
                "the carried weights do not fit the backbone: missing "
                f"{sorted(paths - set(arrays.files))[:5]}, unexpected "
                f"{sorted(set(arrays.files) - paths)[:5]}; run bench/gpu/prepare.py again"
            )
        for variable in backbone.weights:
            variable.assign(arrays[variable.path].astype("float32"))
    return backbone, config


def finetune(args, report, save):
    import keras

    import keras_bert_impl as kb
    from keras_bert_impl.training import create_optimizer

    keras.config.set_dtype_policy("mixed_bfloat16")
    with np.load(os.path.join(args.carry, "mr_ids.npz")) as data:
        parts = {key: data[key] for key in data.files}

    def features(name, limit):
        ids = parts[f"{name}_token_ids"][:limit].astype("int32")
        return {
            "token_ids": ids,
            "segment_ids": np.zeros_like(ids),
            "padding_mask": (ids != 0).astype("int32"),
        }, parts[f"{name}_labels"][:limit].astype("int32")

    limit_train, limit_test = (64, 32) if args.tiny else (None, None)
    x_train, y_train = features("train", limit_train)
    x_test, y_test = features("test", limit_test)
    epochs, batch = (1, 16) if args.tiny else (3, 32)
    results = report["finetune"] = {
        "model": "all-MiniLM-L6-v2 (float16 copy of the real weights), pooled [CLS] head, dropout 0.1",
        "train_examples": len(y_train),
        "test_examples": len(y_test),
        "epochs": epochs,
        "batch_size": batch,
        "seq_len": int(x_train["token_ids"].shape[1]),
        "learning_rate": 5e-5,
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "dtype_policy": "mixed_bfloat16",
        "fused_kernels": args.fused_kernels,
        "seed_spread_cpu_fp32": seed_spread(),
        "runs": {},
    }
    steps_per_epoch = -(-len(y_train) // batch)
    for seed in args.seeds:
        if elapsed() > args.deadline_s - args.phase_reserve_s:
            results["runs"][str(seed)] = {"skipped": f"deadline: {elapsed():.0f} s of {args.deadline_s} s"}
            save()
            continue
        keras.utils.set_random_seed(seed)
        backbone, _ = load_minilm(args.carry, kb, fused_kernels=args.fused_kernels)
        model = kb.BertClassifier(backbone, num_classes=2, pooling="pooled")
        model.compile(
            optimizer=create_optimizer(
                5e-5, train_steps=epochs * steps_per_epoch, warmup_steps=0, weight_decay=0.0
            ),
            loss=model.default_loss(),
            metrics=model.default_metrics(),
            jit_compile=True,
        )
        times = step_times()
        history = model.fit(
            x_train, y_train, batch_size=batch, epochs=epochs, shuffle=True, verbose=0, callbacks=[times]
        )
        logits = model.predict(x_test, batch_size=256, verbose=0)["logits"]
        accuracy = float(np.mean(np.argmax(logits, -1) == y_test))
        epoch_s = [float(end - begin) for begin, end in times.epochs]
        timed = (
            np.diff(np.array(times.steps[steps_per_epoch:])) if epochs > 1 else np.diff(np.array(times.steps))
        )
        run = {
            "test_accuracy": accuracy,
            "epoch_s": epoch_s,
            "step_s_median_after_epoch_1": float(np.median(timed)),
            "train_loss_per_epoch": [float(v) for v in history.history["loss"]],
        }
        spread = results["seed_spread_cpu_fp32"]
        if spread:
            run["within_cpu_seed_spread"] = spread["min"] <= accuracy <= spread["max"]
        results["runs"][str(seed)] = run
        print(
            f"finetune seed {seed}: MR accuracy {accuracy:.4f}, epochs "
            f"{', '.join(f'{s:.1f}' for s in epoch_s)} s",
            flush=True,
        )
        save()
        del model, backbone
        keras.backend.clear_session()
    done = [r["test_accuracy"] for r in results["runs"].values() if "test_accuracy" in r]
    if done:
        results["summary"] = {
            "mean": float(np.mean(done)),
            "min": min(done),
            "max": max(done),
            "runs": len(done),
        }
        save()


def environment(carry):
    import jax
    import keras

    device = jax.devices()[0]
    info = {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "keras": keras.__version__,
        "keras_backend": keras.backend.backend(),
        "platform": device.platform,
        "device_kind": getattr(device, "device_kind", str(device)),
        "device_count": jax.device_count(),
        "tensorflow_imported": "tensorflow" in sys.modules,
        "xla_flags": os.environ.get("XLA_FLAGS"),
    }
    manifest = os.path.join(carry, "manifest.json")
    if os.path.isfile(manifest):
        with open(manifest, encoding="utf-8") as f:
            info["carry_made_from"] = json.load(f).get("git_revision")
    return info


def write(path, report):
    """The whole report, atomically (a temporary file, then a rename)."""
    from keras_bert_impl.atomic_write import write_json_atomically

    report["elapsed_s"] = elapsed()
    write_json_atomically(report, path, indent=1)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--carry", required=True, help="the folder bench/gpu/prepare.py wrote")
    parser.add_argument(
        "--output", required=True, help="the results file (JSON), rewritten after every phase"
    )
    parser.add_argument(
        "--phases",
        nargs="+",
        default=["matmul", "pretrain", "finetune"],
        choices=["matmul", "pretrain", "inference", "finetune"],
    )
    parser.add_argument(
        "--fused-kernels",
        action="store_true",
        help="build the models with fused_kernels=True (the Pallas kernels; on a GPU, or interpreted "
        "with KBERT_PALLAS_INTERPRET=1)",
    )
    parser.add_argument(
        "--inference-models", nargs="+", default=["bert_base", "minilm"], choices=["bert_base", "minilm"]
    )
    parser.add_argument(
        "--inference-length", type=int, default=128, help="tokens per sequence in the inference phase"
    )
    parser.add_argument("--throughput-batch", type=int, default=256, help="the inference phase's large batch")
    parser.add_argument("--tiny", action="store_true", help="toy sizes for a CPU check (the suite's)")
    parser.add_argument(
        "--pretrain-batches",
        type=int,
        nargs="+",
        default=None,
        help="BERT-base batch sizes to time, in order (default 256 512; --tiny: 4)",
    )
    parser.add_argument(
        "--pretrain-steps", type=int, default=None, help="timed steps per batch size (default 30)"
    )
    parser.add_argument(
        "--warmup-steps", type=int, default=3, help="untimed first steps (the first compiles)"
    )
    parser.add_argument(
        "--dropout", type=float, default=0.1, help="the pretraining model's dropout (BERT's 0.1)"
    )
    parser.add_argument(
        "--attention-dropout",
        type=float,
        default=None,
        help="dropout on the attention probabilities (default: --dropout, as in BERT); at 0 the "
        "attention is one fused op (cuDNN's flash attention on a GPU)",
    )
    parser.add_argument(
        "--prng",
        choices=["threefry", "unsafe_rbg"],
        default="threefry",
        help="the random bits of dropout: JAX's default threefry, or XLA's RngBitGenerator",
    )
    parser.add_argument(
        "--activation",
        choices=["gelu", "gelu_approximate"],
        default="gelu",
        help="the pretraining model's GELU: exact erf (BERT's paper, Hugging Face; the presets') or "
        "tanh (Google's modeling.py)",
    )
    parser.add_argument(
        "--mlm-loss",
        choices=["keras", "float32"],
        default="keras",
        help="the masked-LM loss: the library's (Keras' sparse cross-entropy), or logsumexp minus the "
        "label's logit in float32",
    )
    parser.add_argument(
        "--profile-steps",
        type=int,
        default=0,
        help="after timing, profile this many more pretraining steps with JAX's profiler (0: none)",
    )
    parser.add_argument(
        "--profile-dir", default="/tmp/gpu_bench_profile", help="where the profiler's traces go"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="fine-tune seeds, in order")
    parser.add_argument("--matmul-size", type=int, default=None, help="default 8192 (--tiny: 256)")
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=450.0,
        help="stop starting work after this many seconds (the GPU slot is ~15 minutes, start-up included)",
    )
    parser.add_argument(
        "--phase-reserve-s",
        type=float,
        default=60.0,
        help="a batch size or seed starts only if this much time is left before the deadline",
    )
    args = parser.parse_args(argv)
    args.pretrain_batches = args.pretrain_batches or ([4] if args.tiny else [256, 512])
    args.pretrain_steps = args.pretrain_steps or (3 if args.tiny else 30)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    if os.environ["KERAS_BACKEND"] != "jax":
        raise SystemExit(f"gpu_bench runs on the JAX backend; KERAS_BACKEND={os.environ['KERAS_BACKEND']!r}")
    if args.prng == "unsafe_rbg":
        use_rbg_dropout_keys()
    report = {
        "benchmark": "BERT on a GPU through Keras 3's JAX backend: pretraining MFU and MR fine-tuning",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python -m bench.gpu.gpu_bench " + " ".join(sys.argv[1:] if argv is None else argv),
        "tiny": args.tiny,
        "environment": environment(args.carry),
        "jax_default_prng_impl": os.environ.get("JAX_DEFAULT_PRNG_IMPL", "<unset: threefry2x32>"),
    }
    name, peak = datasheet_peak(report["environment"]["device_kind"])
    report["datasheet"] = name
    report["datasheet_bf16_tflops"] = peak
    print(json.dumps(report["environment"]), flush=True)

    def save():
        write(args.output, report)

    save()

    def matmul(args, report, save):
        report["matmul"] = measure_matmul(
            args.matmul_size or (256 if args.tiny else 8192), 5 if args.tiny else 20
        )
        print(
            f"bf16 matmul {report['matmul']['size']}^3: {report['matmul']['tflops']:.1f} TFLOP/s", flush=True
        )

    phases = (("matmul", matmul), ("pretrain", pretrain), ("inference", inference), ("finetune", finetune))
    run_phases(phases, args, report, save)


def run_phases(phases, args, report, save, *extra):
    """Runs each (name, phase) of `phases` that --phases names as phase(args, report, save, *extra),
    saving the report after each; a phase that fails is recorded under report["errors"] and the
    next still runs (one phase's failure must not cost the others their GPU time)."""
    failed = False
    for name, phase in phases:
        if name not in args.phases:
            continue
        try:
            phase(args, report, save, *extra)
        except Exception as error:
            import traceback

            traceback.print_exc()
            report.setdefault("errors", {})[name] = f"{type(error).__name__}: {error}"[:2000]
            failed = True
        save()
    if failed:
        raise SystemExit(f"a phase failed (see 'errors' in {args.output})")
    print(f"done in {elapsed():.0f} s; wrote {args.output}", flush=True)


if __name__ == "__main__":
    main()
