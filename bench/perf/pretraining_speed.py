"""bert_tiny pretraining speed on this CPU: ours (MLM + NSP) vs KerasHub BertMaskedLM.

Measures, in one process and with interleaved rounds (so that machine noise
hits every variant alike), the training steps/s of

  1. ours: keras_bert_impl.BertPretrainer on BertBackbone.from_preset("bert_tiny"),
     MLM + NSP, with its default loss and weighted metrics (what `kbert pretrain`
     trains with: MaskedSparseCrossentropy and MaskedLMAccuracy on the MLM output,
     sparse categorical cross-entropy and accuracy on NSP) and our `create_optimizer`
     AdamW: `model.compile(optimizer=create_optimizer(...))`,
  2. kerashub: keras_hub.models.BertMaskedLM(keras_hub.models.BertBackbone(same
     config), preprocessor=None), MLM only, compiled with the same MLM loss and
     weighted metric (the public MaskedSparseCrossentropy and MaskedLMAccuracy) and
     the same `create_optimizer` AdamW (a fresh instance),

both trained by `model.fit` on an in-memory tf.data dataset of the same
synthetic batches: bert_tiny (2 layers, hidden 128, 2 heads, intermediate 512,
vocabulary 30522, max_sequence_length 512), sequence length 128, batch 32,
20 masked positions per sequence (Google's max_predictions_per_seq for 128),
dropout 0.1, float32, no XLA unless `--jit on` is asked for.

KerasHub's BertMaskedLM has no next-sentence head, so our step does strictly
more work (the NSP logits, its loss and metric, and the pooler's gradient).
The diagnostic variants (`--only`) tell the pieces apart:

  ours_mlm_only          our pretrainer with the NSP output cut off (the same
                         layers and weights, MLM loss and metric only): the
                         like-for-like comparison with KerasHub,
  ours_gelu_approximate  ours with KerasHub's tanh GELU in the encoder (its MLM
                         head, like KerasHub's, keeps the exact GELU).

Nothing is downloaded: both models are built from their configuration with
random weights (never KerasHub's `from_preset`).

    make bench-pretraining-speed     # or:
    python -m bench.perf.pretraining_speed --wait-idle 60 --rounds 16 --steps 30 \
        --only ours kerashub ours_mlm_only kerashub_default_metric \
        --output bench/results/pretraining_speed.json
    # a quick look:
    python -m bench.perf.pretraining_speed --rounds 3 --steps 10 --output /tmp/pretraining_speed.json
    python -m bench.perf.pretraining_speed --xla --only ours kerashub ours_mlm_only  # also with XLA

A default run (8 rounds x 20 steps, two variants, no XLA) takes about 3 minutes
on an idle 2-core machine (much longer under load), plus up to --wait-idle seconds.
On a shared machine the wall-clock figures move by tens of percent from round to
round: compare within one file, and read the paired and CPU-normalized ratios too.
"""

import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.common import (  # noqa: E402
    NPROC,
    command_line,
    load_warnings,
    machine_info,
    read_loadavg,
    tensorflow_threads,
    wait_for_idle,
    write_report,
)

tf.get_logger().setLevel("ERROR")
# Expected, said once in the results instead: KerasHub's backbone computes a pooler its
# BertMaskedLM never uses (so it gets no gradient), and so does ours_mlm_only.
warnings.filterwarnings("ignore", message="Gradients do not exist for variables")

import keras  # noqa: E402

from keras_bert_impl import (  # noqa: E402
    BERT_PRESETS,
    BertBackbone,
    BertPretrainer,
    MaskedLMAccuracy,
    MaskedSparseCrossentropy,
)
from keras_bert_impl.data import to_pretrainer_inputs  # noqa: E402
from keras_bert_impl.training import create_optimizer  # noqa: E402

PRESET = "bert_tiny"
CONFIG = {
    k: BERT_PRESETS[PRESET][k]
    for k in (
        "vocabulary_size",
        "num_layers",
        "num_heads",
        "hidden_dim",
        "intermediate_dim",
        "max_sequence_length",
        "num_segments",
    )
}
DROPOUT = 0.1
# The optimizer both sides get (a fresh create_optimizer each), as `kbert pretrain` makes it
# with its defaults (peak rate 1e-4, 10% warm-up, weight decay 0.01); train_steps only shapes
# the schedule, which costs the same every step.
OPTIMIZER = dict(learning_rate=1e-4, train_steps=10_000, warmup_steps=1_000, weight_decay=0.01)
# bert-base-uncased's ids of the special tokens; the synthetic words avoid them.
PAD, CLS, SEP, MASK, FIRST_WORD = 0, 101, 102, 103, 1000

MODELS = ("ours", "kerashub")
DESCRIPTIONS = {
    "ours": (
        f'keras_bert_impl.BertPretrainer(BertBackbone.from_preset("{PRESET}")): MLM + NSP, exact erf '
        "GELU (the preset default); its default loss and metrics, as `kbert pretrain` trains it"
    ),
    "kerashub": (
        "keras_hub.models.BertMaskedLM(keras_hub.models.BertBackbone(same config), preprocessor=None): MLM "
        "only (no NSP head), tanh GELU in the encoder, exact GELU in the MLM head; compiled with the same "
        "loss and MLM accuracy metric as ours"
    ),
    "kerashub_default_metric": "diagnostic: KerasHub's BertMaskedLM with its default compile (Keras' "
    "SparseCategoricalAccuracy, a full argmax over the vocabulary)",
    "ours_mlm_only": (
        "diagnostic: ours with the NSP output cut off (keras.Model(inputs, mlm_logits) over the same "
        "layers), MLM loss and weighted metric only: the like-for-like comparison with KerasHub"
    ),
    "ours_gelu_approximate": (
        "diagnostic: ours with activation='gelu_approximate' in the encoder (KerasHub's), exact GELU in "
        "the MLM head (as KerasHub's)"
    ),
}
# --- data -------------------------------------------------------------------


def make_features(num_examples, length, max_predictions, vocabulary_size, seed):
    """Synthetic examples under Google's feature names, as the pretraining records hold them.

    90% fill the whole length and 10% are shorter (Google's short_seq_prob), so some
    padding is there; sentence B starts at a random point; round(15%) of the real
    tokens, at most `max_predictions`, are masked and the rest of the slots padded
    with weight 0; next_sentence_labels are random.
    """
    rng = np.random.default_rng(seed)
    feats = {
        "input_ids": np.zeros((num_examples, length), np.int64),
        "input_mask": np.zeros((num_examples, length), np.int64),
        "segment_ids": np.zeros((num_examples, length), np.int64),
        "masked_lm_positions": np.zeros((num_examples, max_predictions), np.int64),
        "masked_lm_ids": np.zeros((num_examples, max_predictions), np.int64),
        "masked_lm_weights": np.zeros((num_examples, max_predictions), np.float32),
        "next_sentence_labels": rng.integers(0, 2, size=(num_examples, 1)),
    }
    for i in range(num_examples):
        n = length if rng.random() >= 0.1 else int(rng.integers(length // 4, length))
        a_end = int(rng.integers(2, n - 2))  # [CLS] A... [SEP] B... [SEP]
        ids = rng.integers(FIRST_WORD, vocabulary_size, size=n)
        ids[0], ids[a_end], ids[n - 1] = CLS, SEP, SEP
        candidates = np.array([j for j in range(1, n - 1) if j != a_end])
        k = min(max_predictions, max(1, int(round(n * 0.15))))
        positions = np.sort(rng.choice(candidates, size=k, replace=False))
        feats["masked_lm_ids"][i, :k] = ids[positions]
        feats["masked_lm_positions"][i, :k] = positions
        feats["masked_lm_weights"][i, :k] = 1.0
        ids[positions] = MASK
        feats["input_ids"][i, :n] = ids
        feats["input_mask"][i, :n] = 1
        feats["segment_ids"][i, a_end + 1 : n] = 1
    return feats


def make_batches(args):
    """(ours, kerashub): lists of `args.num_batches` (x, y, sample_weight) batches of the same examples.

    Ours are exactly `to_pretrainer_inputs` of the batched features (what
    PretrainingRecordReader.dataset yields); KerasHub's carry the same arrays in
    its format (x without the NSP label, y = the masked ids, sample_weight = the
    mask weights), as BertMaskedLMPreprocessor would give.
    """
    feats = make_features(
        args.num_batches * args.batch_size,
        args.seq_len,
        args.max_predictions,
        CONFIG["vocabulary_size"],
        args.seed,
    )
    ours, hub = [], []
    for b in range(args.num_batches):
        s = slice(b * args.batch_size, (b + 1) * args.batch_size)
        x, y, w = to_pretrainer_inputs({k: tf.constant(v[s]) for k, v in feats.items()})
        ours.append((x, y, w))
        hub.append((dict(x), y["mlm_logits"], w["mlm_logits"]))
    return ours, hub


def in_memory_dataset(batches):
    """A repeated tf.data dataset over the prepared batches: no parsing or masking per step,
    so the input pipeline costs the two sides the same (next to nothing)."""
    stacked = tf.nest.map_structure(lambda *t: tf.stack(t), *batches)
    return tf.data.Dataset.from_tensor_slices(stacked).repeat().prefetch(tf.data.AUTOTUNE)


# --- models -----------------------------------------------------------------


def mlm_loss_and_metrics():
    """(loss, weighted metrics) of BertPretrainer's MLM output, from the public classes: for
    the models that are not a BertPretrainer (KerasHub's, ours_mlm_only), so that every side
    computes the same things per masked position."""
    return MaskedSparseCrossentropy(), [MaskedLMAccuracy(name="accuracy")]


def build_ours(jit, activation=None):
    kwargs = {"dropout": DROPOUT}
    if activation is not None:
        kwargs["activation"] = activation
    backbone = BertBackbone.from_preset(PRESET, **kwargs)
    model = BertPretrainer(backbone, activation="gelu" if activation else None)
    # The pretrainer's own loss and weighted metrics: what `kbert pretrain` trains with.
    model.compile(optimizer=create_optimizer(**OPTIMIZER), jit_compile=jit)
    return model


def build_ours_mlm_only(jit):
    pretrainer = BertPretrainer(BertBackbone.from_preset(PRESET, dropout=DROPOUT))
    model = keras.Model(
        pretrainer.input, {"mlm_logits": pretrainer.output["mlm_logits"]}, name="ours_mlm_only"
    )
    loss, metrics = mlm_loss_and_metrics()
    model.compile(
        optimizer=create_optimizer(**OPTIMIZER),
        loss={"mlm_logits": loss},
        weighted_metrics={"mlm_logits": metrics},
        jit_compile=jit,
    )
    return model


def build_kerashub(jit, default_metric=False):
    import keras_hub

    backbone = keras_hub.models.BertBackbone(**CONFIG, dropout=DROPOUT)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    if default_metric:
        # BertMaskedLM's defaults: SparseCategoricalCrossentropy(from_logits=True) and a weighted
        # SparseCategoricalAccuracy; only the optimizer (and XLA) is ours.
        model.compile(optimizer=create_optimizer(**OPTIMIZER), jit_compile=jit)
        return model
    # The same loss and metric as ours, so the comparison is of the models and train steps.
    loss, metrics = mlm_loss_and_metrics()
    model.compile(
        optimizer=create_optimizer(**OPTIMIZER), loss=loss, weighted_metrics=metrics, jit_compile=jit
    )
    return model


def ours_fit_data(batches):
    return batches


def mlm_only_fit_data(batches):
    return [(x, {"mlm_logits": y["mlm_logits"]}, {"mlm_logits": w["mlm_logits"]}) for x, y, w in batches]


# name -> (builder(jit), which batches, adapter of those batches)
VARIANTS = {
    "ours": (build_ours, "ours", ours_fit_data),
    "kerashub": (build_kerashub, "kerashub", ours_fit_data),
    "kerashub_default_metric": (
        lambda jit: build_kerashub(jit, default_metric=True),
        "kerashub",
        ours_fit_data,
    ),
    "ours_mlm_only": (build_ours_mlm_only, "ours", mlm_only_fit_data),
    "ours_gelu_approximate": (lambda jit: build_ours(jit, "gelu_approximate"), "ours", ours_fit_data),
}


def count_parameters(model):
    return int(sum(int(np.prod(w.shape)) for w in model.weights))


# --- timing -----------------------------------------------------------------


class StepClock(keras.callbacks.Callback):
    """Wall and process-CPU time at the end of every training step of one `fit`."""

    def on_train_begin(self, logs=None):
        self.wall, self.cpu = [], []

    def on_train_batch_end(self, batch, logs=None):
        self.wall.append(time.perf_counter())
        self.cpu.append(time.process_time())


def run_round(model, dataset, steps, skip=1):
    """One `fit` of skip + steps steps; times the last `steps` (from the end of step
    `skip` to the end of the last), so fit's set-up and first step are not counted.
    Returns (seconds per step, CPU seconds per step, logs of the last step)."""
    clock = StepClock()
    history = model.fit(
        dataset, epochs=1, steps_per_epoch=skip + steps, verbose=0, shuffle=False, callbacks=[clock]
    )
    wall = (clock.wall[-1] - clock.wall[skip - 1]) / steps
    cpu = (clock.cpu[-1] - clock.cpu[skip - 1]) / steps
    return wall, cpu, {k: float(v[-1]) for k, v in history.history.items()}


def summarize(seconds, cpu_seconds, batch):
    med, best = statistics.median(seconds), min(seconds)
    cpu_med = statistics.median(cpu_seconds)
    return {
        "seconds_per_step": [round(t, 5) for t in seconds],
        "seconds_per_step_median": round(med, 5),
        "seconds_per_step_min": round(best, 5),
        "steps_per_second": [round(1 / t, 3) for t in seconds],
        "steps_per_second_median": round(1 / med, 3),
        "steps_per_second_best": round(1 / best, 3),
        "examples_per_second_median": round(batch / med, 1),
        "cpu_seconds_per_step": [round(c, 5) for c in cpu_seconds],
        # Per CPU-second of this process times the core count: other processes' time is not
        # counted, so it stays near the idle figure under load (reads a little high where a
        # step cannot keep every core busy).
        "cpu_normalized_steps_per_second_median": round(NPROC / cpu_med, 3),
    }


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
        allow_abbrev=False,
    )
    parser.add_argument("--output", help="write the JSON results here (atomically)")
    parser.add_argument("--rounds", type=int, default=8, help="timed rounds, interleaved across variants")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per variant per round")
    parser.add_argument(
        "--warmup-steps",
        type=int,
        default=10,
        help="untimed training steps per variant after compiling (the first traces the step)",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument(
        "--max-predictions",
        type=int,
        default=20,
        help="masked positions per sequence (Google's max_predictions_per_seq; 20 for 128)",
    )
    parser.add_argument("--num-batches", type=int, default=8, help="distinct synthetic batches, cycled")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=sorted(VARIANTS),
        default=None,
        help=f"variants to measure (default: {' '.join(MODELS)})",
    )
    parser.add_argument(
        "--jit",
        nargs="+",
        choices=("off", "on"),
        default=["off"],
        help="jit_compile (XLA) off and/or on, for every variant (default: off)",
    )
    parser.add_argument(
        "--xla", action="store_true", help="shorthand for --jit off on: both sides with and without XLA"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before timing, wait up to this long for the 1-minute load average to drop "
        "below half the core count (a shared machine)",
    )
    args = parser.parse_args(argv)
    for name in ("rounds", "steps", "batch_size", "num_batches", "max_predictions"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1. Received: {getattr(args, name)}")
    if args.seq_len < 8 or args.seq_len > CONFIG["max_sequence_length"]:
        parser.error(f"--seq-len must be in [8, {CONFIG['max_sequence_length']}]. Received: {args.seq_len}")
    if args.xla:
        args.jit = ["off", "on"]
    return args


def build_variants(args, names, jits, batches):
    """Every variant built, compiled and warmed up: (models, datasets, parameters, build_seconds,
    warmup_logs, errors), keyed by "name/jit_compile=..." (parameters by name)."""
    models, datasets, parameters, build_seconds, warmup_logs, errors = {}, {}, {}, {}, {}, {}
    for name in names:
        builder, source, adapt = VARIANTS[name]
        for jit in jits:
            key = f"{name}/jit_compile={jit}"
            t0 = time.perf_counter()
            try:
                model = builder(jit)
                dataset = in_memory_dataset(adapt(batches[source]))
                history = model.fit(
                    dataset, epochs=1, steps_per_epoch=args.warmup_steps, verbose=0, shuffle=False
                )
                warmup_logs[key] = {k: round(float(v[-1]), 4) for k, v in history.history.items()}
            except Exception as e:  # noqa: BLE001 - record and go on
                errors[key] = f"{type(e).__name__}: {str(e)[:500]}"
                print(f"# FAILED {key}: {errors[key]}", flush=True)
                continue
            models[key], datasets[key] = model, dataset
            parameters[name] = {
                "total": count_parameters(model),
                "trainable": int(sum(int(np.prod(w.shape)) for w in model.trainable_weights)),
            }
            build_seconds[key] = round(time.perf_counter() - t0, 1)
            print(
                f"# ready {key}: {parameters[name]['total']:,} parameters, build + {args.warmup_steps} "
                f"warm-up steps {build_seconds[key]:.1f}s, loss {warmup_logs[key].get('loss')}",
                flush=True,
            )
    return models, datasets, parameters, build_seconds, warmup_logs, errors


def timed_rounds(args, models, datasets):
    """Every variant runs one fit of `steps` timed steps per round, in an order rotated every
    round, so that load from other processes hits them alike: (seconds, cpu_seconds, last_logs,
    round_loadavg)."""
    keys = list(models)
    seconds = {k: [] for k in keys}
    cpu_seconds = {k: [] for k in keys}
    last_logs = {}
    round_loadavg = []
    for r in range(args.rounds):
        order = keys[r % len(keys) :] + keys[: r % len(keys)]
        for key in order:
            wall, cpu, last_logs[key] = run_round(models[key], datasets[key], args.steps)
            seconds[key].append(wall)
            cpu_seconds[key].append(cpu)
        round_loadavg.append(read_loadavg()[0] if read_loadavg() else None)
        line = ", ".join(
            f"{k.split('/')[0]}{'+xla' if k.endswith('True') else ''} {1 / seconds[k][-1]:.2f}" for k in keys
        )
        print(f"# round {r + 1}/{args.rounds} (load {round_loadavg[-1]}): steps/s {line}", flush=True)
    return seconds, cpu_seconds, last_logs, round_loadavg


def ratios_over_kerashub(jits, keys, results, seconds, cpu_seconds):
    """Ratios against KerasHub at the same jit setting: of the medians, and the median of the
    per-round ratios (each pair measured within one round, less disturbed by load drifts)."""
    ratios = {}
    for jit in jits:
        ref = f"kerashub/jit_compile={jit}"
        if ref not in results:
            continue
        for key in keys:
            if key == ref or not key.endswith(f"={jit}"):
                continue
            paired = [b / a for a, b in zip(seconds[key], seconds[ref])]  # (1/a) / (1/b)
            cpu_paired = [b / a for a, b in zip(cpu_seconds[key], cpu_seconds[ref])]
            ratios[f"{key.split('/')[0]}_over_kerashub/jit_compile={jit}"] = {
                "ratio_of_medians": round(
                    results[key]["steps_per_second_median"] / results[ref]["steps_per_second_median"], 3
                ),
                "per_round": [round(p, 3) for p in paired],
                "paired_median": round(statistics.median(paired), 3),
                "cpu_normalized_paired_median": round(statistics.median(cpu_paired), 3),
            }
    return ratios


def ours_summary(jits, results, ratios):
    summary = {}
    for jit in jits:
        ours_key, hub_key = f"ours/jit_compile={jit}", f"kerashub/jit_compile={jit}"
        ratio = ratios.get(f"ours_over_kerashub/jit_compile={jit}")
        if ratio:
            summary[f"jit_compile={jit}"] = {
                "ours_steps_per_second_median": results[ours_key]["steps_per_second_median"],
                "kerashub_steps_per_second_median": results[hub_key]["steps_per_second_median"],
                "ours_over_kerashub_ratio_of_medians": ratio["ratio_of_medians"],
                "ours_over_kerashub_paired_median": ratio["paired_median"],
                "target_met_ratio_of_medians_ge_1": ratio["ratio_of_medians"] >= 1.0,
            }
    return summary


def step_warnings(results):
    warns = []
    for key, s in results.items():
        if s["seconds_per_step_median"] > 1.25 * s["seconds_per_step_min"]:
            warns.append(
                f"{key}: median step {s['seconds_per_step_median']:.4f}s vs best "
                f"{s['seconds_per_step_min']:.4f}s: the machine's speed varied during the run"
            )
        if not s["finite_loss"]:
            warns.append(f"{key}: non-finite loss {s['last_step_logs']}")
    return warns


def print_results(report, ours_p, hub_p, load_before, load_after):
    print()
    for name, p in report["parameters"].items():
        print(f"parameters {name:24s} {p['total']:>10,d} (trainable {p['trainable']:,d})")
    if ours_p and hub_p:
        print(f"  ours - kerashub = {ours_p - hub_p:,d} (the NSP head, 128 x 2 + 2; both have the pooler)")
    print(f"{'variant':36s} {'steps/s med':>11s} {'best':>7s} {'ex/s med':>8s} | {'cpu steps/s':>11s}  loss")
    for key, s in report["results"].items():
        print(
            f"{key:36s} {s['steps_per_second_median']:11.2f} {s['steps_per_second_best']:7.2f} "
            f"{s['examples_per_second_median']:8.1f} | {s['cpu_normalized_steps_per_second_median']:11.2f}  "
            f"{s['last_step_logs'].get('loss', float('nan')):.3f}"
        )
    for key, r in report["ratios_over_kerashub"].items():
        print(
            f"{key:44s} ratio of medians {r['ratio_of_medians']:.3f}, paired median "
            f"{r['paired_median']:.3f}, cpu paired {r['cpu_normalized_paired_median']:.3f}; per round "
            f"{r['per_round']}"
        )
    for key, err in report["errors"].items():
        print(f"{key:36s} FAILED: {err[:100]}")
    for w in report["warnings"]:
        print(f"WARNING: {w}")
    print(f"(load before {load_before}, after {load_after}; wall {report['wall_seconds']:.0f}s)")


def main(argv=None):
    args = parse_args(argv)
    wall_start = time.perf_counter()
    names = args.only or list(MODELS)
    jits = [j == "on" for j in ("off", "on") if j in args.jit]
    keras.utils.set_random_seed(args.seed)
    info = machine_info(**tensorflow_threads())
    print(
        f"# {info['cpu_model']}, nproc={NPROC}, packages {info['packages']}, loadavg "
        f"{info['loadavg_at_start']}",
        flush=True,
    )

    batches = dict(zip(("ours", "kerashub"), make_batches(args)))
    masked_per_sequence = float(
        np.mean([w["mlm_logits"].numpy().sum(axis=1).mean() for _, _, w in batches["ours"]])
    )
    real_tokens = float(
        np.mean([x["padding_mask"].numpy().sum(axis=1).mean() for x, _, _ in batches["ours"]])
    )

    # Build, compile, warm up.
    models, datasets, parameters, build_seconds, warmup_logs, errors = build_variants(
        args, names, jits, batches
    )

    if args.wait_idle > 0:
        waited = wait_for_idle(args.wait_idle)
        print(f"# waited {waited:.0f}s for the machine to go idle; loadavg {read_loadavg()}", flush=True)
    load_before = read_loadavg()

    keys = list(models)
    seconds, cpu_seconds, last_logs, round_loadavg = timed_rounds(args, models, datasets)
    load_after = read_loadavg()

    results = {key: summarize(seconds[key], cpu_seconds[key], args.batch_size) for key in keys}
    for key in keys:
        results[key]["last_step_logs"] = {k: round(v, 4) for k, v in last_logs[key].items()}
        results[key]["finite_loss"] = bool(np.isfinite(last_logs[key].get("loss", np.nan)))

    ratios = ratios_over_kerashub(jits, keys, results, seconds, cpu_seconds)
    summary = ours_summary(jits, results, ratios)

    warns = load_warnings(load_before, load_after, "the paired and cpu_normalized figures")
    warns += step_warnings(results)
    info["loadavg_before_timing"] = load_before
    info["loadavg_after_each_round"] = round_loadavg
    info["loadavg_at_end"] = load_after

    ours_p, hub_p = parameters.get("ours", {}).get("total"), parameters.get("kerashub", {}).get("total")
    report = {
        "target": "ours steps/s >= KerasHub BertMaskedLM steps/s with the same config",
        "settings": {
            "preset": PRESET,
            "config": CONFIG,
            "dropout": DROPOUT,
            "dtype": "float32",
            "batch_size": args.batch_size,
            "sequence_length": args.seq_len,
            "max_predictions_per_seq": args.max_predictions,
            "optimizer": (
                "keras_bert_impl.training.create_optimizer(%s): AdamW, weight decay 0.01 (not on biases "
                "and LayerNorm), global clipnorm 1.0, epsilon 1e-6, warm-up + linear decay; a fresh "
                "instance per model"
            )
            % ", ".join(f"{k}={v}" for k, v in OPTIMIZER.items()),
            "jit_compile": jits,
            "data": (
                f"{args.num_batches} distinct synthetic batches (seed {args.seed}) cycled from memory: 90% "
                "of sequences full length, 10% shorter (padded); sentence B from a random point; "
                f"round(15%) of the real tokens masked, at most {args.max_predictions} (mean "
                f"{masked_per_sequence:.2f} weighted positions and {real_tokens:.1f} real tokens per "
                "sequence); random NSP labels. Ours: to_pretrainer_inputs of Google-named features; "
                "KerasHub: the same arrays as (token_ids, segment_ids, padding_mask, mask_positions), "
                "mask_ids, mask_weights"
            ),
            "timing": (
                "model.fit(dataset, steps_per_epoch=1 + steps) per variant per round, order rotated every "
                "round; a round's time is from the end of its first step to the end of its last, over "
                "`steps` (fit's per-step Python loop included, its set-up excluded; `kbert pretrain`'s own "
                "callbacks, a backup every 200 steps and TensorBoard at epoch ends, are not run)"
            ),
            "rounds": args.rounds,
            "steps_per_round": args.steps,
            "warmup_steps": args.warmup_steps,
        },
        "work_difference": (
            "KerasHub's BertMaskedLM has no next-sentence head: our step does strictly more work (pooler "
            "gradient, NSP dense, its loss and weighted accuracy). KerasHub's backbone still computes its "
            "pooler in the forward pass but gets no gradient for it."
        ),
        "models": {name: DESCRIPTIONS[name] for name in names},
        "parameters": parameters,
        "parameter_difference_ours_minus_kerashub": (ours_p - hub_p) if ours_p and hub_p else None,
        "build_seconds": build_seconds,
        "warmup_last_step_logs": warmup_logs,
        "results": results,
        "summary": summary,
        "ratios_over_kerashub": ratios,
        "errors": errors,
        "warnings": warns,
        "wall_seconds": round(time.perf_counter() - wall_start, 1),
    }

    print_results(report, ours_p, hub_p, load_before, load_after)

    if args.output:
        write_report(
            args.output,
            f"{PRESET} pretraining training steps/s (model.fit), float32, CPU: ours vs KerasHub",
            report,
            info,
            command=command_line(argv),
        )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
