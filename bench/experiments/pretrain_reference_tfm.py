"""An outside reference for the bert_tiny NSP plateau: TF Model Garden's own BERT
pretraining (tf-models-official MaskedLMTask: its BertPretrainDataLoader, BertEncoder,
BertPretrainerV2 with a `next_sentence` ClassificationHead, its MLM + NSP losses and its
AdamW optimizer factory) on the very records `kbert pretrain` trained on.

Our 30,000-step bert_tiny run (bench/results/pretrain_tiny_vocab8k_30k.json) kept NSP
at chance for 9,000 steps. If Model Garden's trainer, with the same model size, records,
batch, learning-rate schedule and clipping, also sits at chance that long, the plateau
belongs to the task and the model size, not to our code; if it learns NSP much earlier,
ours has something to find.

    make experiment-pretrain-reference-tfm     # or, once pretrain_tiny.py --run vocab8k_30k has run:
    .venv/bin/python -m bench.experiments.pretrain_reference_tfm --work data/bench/pretrain_tiny_vocab8k_30k \
        --steps 12000 --output bench/results/pretrain_reference_tfm.json

--work is a bench/experiments/pretrain_tiny.py work folder (pretrain/records, heldout_records, and its
committed result supplies our per-epoch curve for the side-by-side). The schedule is the
30,000-step one of that run (10% linear warm-up, linear decay to 0); --steps stops the
reference earlier on the same schedule. The results file is rewritten after every
--log-every steps, so a run stopped early still leaves every finished interval.
"""

import argparse
import json
import os
import sys
import time

from bench.common import REPO, RESULTS, command_line, machine_info, write_report

BENCHMARK = (
    "TF Model Garden's BERT pretraining (MaskedLMTask) on the records of our bert_tiny run: "
    "does its NSP sit at chance as long as ours?"
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    p.add_argument(
        "--work", required=True, help="pretrain_tiny.py work folder (pretrain/records, heldout_records)."
    )
    p.add_argument(
        "--ours",
        default=os.path.join(RESULTS, "pretrain_tiny_vocab8k_30k.json"),
        help="Our committed run on the same records, for the side-by-side.",
    )
    p.add_argument(
        "--ours-runs",
        nargs="*",
        default=[],
        metavar="DIR",
        help="More `kbert pretrain` run folders on the same records (other seeds; finished or "
        "stopped): their per-epoch figures are read from their TensorBoard logs.",
    )
    p.add_argument(
        "--reuse",
        action="store_true",
        help=(
            "Keep the reference intervals already in --output (a finished run) and only re-read --ours-runs."
        ),
    )
    p.add_argument(
        "--steps", type=int, default=12000, help="Steps to run (on the --schedule-steps schedule)."
    )
    p.add_argument("--schedule-steps", type=int, default=30000, help="Length of the learning-rate schedule.")
    p.add_argument("--warmup-fraction", type=float, default=0.1)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--log-every", type=int, default=1000, help="Steps per reported interval (our run's epoch)."
    )
    p.add_argument(
        "--validation-steps", type=int, default=50, help="Held-out batches per evaluation (ours: 50)."
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", required=True)
    args = p.parse_args(argv)
    for name in ("steps", "schedule_steps", "batch_size", "log_every", "validation_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1. Received: {getattr(args, name)}")
    if args.steps > args.schedule_steps:
        p.error(
            f"--steps {args.steps} is past the end of the --schedule-steps {args.schedule_steps} schedule."
        )
    if args.steps % args.log_every:
        p.error(
            f"--steps {args.steps} is not a multiple of --log-every {args.log_every}: the last interval "
            "would be partial."
        )
    return args


def records_of(folder):
    """(shard paths, pretraining.json) of a records folder written by kbert pretrain-data."""
    meta_file = os.path.join(folder, "pretraining.json")
    if not os.path.isfile(meta_file):
        sys.exit(
            f"{folder} has no pretraining.json: run `python -m bench.experiments.pretrain_tiny --work "
            f"{os.path.dirname(folder)} --pretrain-only` (or `make experiment-pretrain-reference-tfm`) first."
        )
    with open(meta_file, encoding="utf-8") as f:
        meta = json.load(f)
    shards = [os.path.join(folder, s) for s in meta["shards"]]
    missing = [s for s in shards if not os.path.isfile(s)]
    if missing:
        sys.exit(f"{folder}/pretraining.json lists shards that are not there: {missing}")
    return shards, meta


def ours_curve(path, log_every):
    """Our per-epoch figures from the committed pretrain_tiny.py result on the same records."""
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    phase = report["pretraining_phases"][0]
    epochs = len(phase["train_nsp_accuracy_per_epoch"])
    if phase["steps"] != epochs * log_every:
        sys.exit(
            f"{path}: {phase['steps']} steps in {epochs} epochs, not {log_every}-step ones: "
            f"pass --log-every {phase['steps'] // epochs} so the intervals line up."
        )
    return {
        "file": os.path.relpath(path, REPO),
        "command": report["command"],
        "records": phase["run"] + "/records",
        "steps": phase["steps"],
        "train_nsp_accuracy": phase["train_nsp_accuracy_per_epoch"],
        "heldout_nsp_accuracy": phase["heldout_nsp_accuracy_per_epoch"],
        "train_mlm_accuracy": phase["train_mlm_accuracy_per_epoch"],
        "heldout_mlm_accuracy": phase["heldout_mlm_accuracy_per_epoch"],
    }


def ours_run_curve(run, log_every):
    """Per-epoch figures of a `kbert pretrain` run folder, from its TensorBoard event files
    (written every epoch, so a stopped run has its finished epochs), and its settings from
    the fingerprint in its backup (a finished run has deleted its backup: then metrics.json)."""
    import numpy as np
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    def epochs(part, tag):
        values = {}
        for path in sorted(tf.io.gfile.glob(os.path.join(run, "logs", part, "events.out.tfevents.*"))):
            for raw in tf.data.TFRecordDataset(path):
                event = event_pb2.Event.FromString(raw.numpy())
                for v in event.summary.value:
                    if v.tag == tag:
                        values[event.step] = float(
                            tf.make_ndarray(v.tensor)
                        )  # a resumed run rewrites its epochs
        if sorted(values) != list(range(len(values))):
            sys.exit(
                f"{run}/logs/{part}: epochs {sorted(values)} for {tag} are not 0..N-1: one run per folder."
            )
        return [values[e] for e in range(len(values))]

    backup = os.path.join(run, "backup", "training_state.npz")
    if os.path.isfile(backup):
        with np.load(backup, allow_pickle=False) as state:
            settings = json.loads(bytes(state["meta"]).decode("utf-8"))["fingerprint"]["run"]
    else:
        with open(os.path.join(run, "metrics.json"), encoding="utf-8") as f:
            settings = {
                k: v
                for k, v in json.load(f).items()
                if k
                in (
                    "records",
                    "steps",
                    "steps_per_epoch",
                    "batch_size",
                    "learning_rate",
                    "seed",
                    "warmup_fraction",
                )
            }
    if settings["steps_per_epoch"] != log_every:
        sys.exit(f"{run}: {settings['steps_per_epoch']}-step epochs, not --log-every {log_every}.")
    return {
        "run": os.path.relpath(run, REPO),
        "settings": settings,
        "train_nsp_accuracy": epochs("train", "epoch_nsp_logits_accuracy"),
        "heldout_nsp_accuracy": epochs("validation", "epoch_nsp_logits_accuracy"),
        "train_mlm_accuracy": epochs("train", "epoch_mlm_logits_accuracy"),
        "heldout_mlm_accuracy": epochs("validation", "epoch_mlm_logits_accuracy"),
    }


def first_step_above(curve, threshold, log_every):
    """The end step of the first interval whose figure exceeds `threshold`, or None."""
    return next(((i + 1) * log_every for i, v in enumerate(curve) if v > threshold), None)


def main(argv=None):
    args = parse_args(argv)
    train_shards, train_meta = records_of(os.path.join(args.work, "pretrain", "records"))
    heldout_shards, heldout_meta = records_of(os.path.join(args.work, "heldout_records"))
    seq_len = train_meta["max_seq_length"]
    if heldout_meta["max_seq_length"] != seq_len:
        sys.exit(
            f"held-out records are {heldout_meta['max_seq_length']} tokens, training {seq_len}: make them "
            "alike."
        )

    ours = ours_curve(args.ours, args.log_every)
    ours_runs = [ours_run_curve(run, args.log_every) for run in args.ours_runs]
    for run in ours_runs:
        expected = {
            "records": os.path.abspath(os.path.join(args.work, "pretrain", "records")),
            "steps": args.schedule_steps,
            "batch_size": args.batch_size,
            "learning_rate": args.learning_rate,
            "warmup_fraction": args.warmup_fraction,
        }
        differ = {k: (run["settings"].get(k), v) for k, v in expected.items() if run["settings"].get(k) != v}
        if differ:
            sys.exit(f"{run['run']} is not a run of these settings (its value, expected): {differ}")
    warmup = int(args.schedule_steps * args.warmup_fraction)
    if args.reuse:
        with open(args.output, encoding="utf-8") as f:
            done = json.load(f)
        if not done["complete"] or done["settings"]["steps_run"] != args.steps:
            sys.exit(
                f"--reuse: {args.output} holds {done['settings']['steps_run']} of {args.steps} steps; run "
                "without --reuse."
            )
        save_report(
            args,
            done["reference"],
            ours,
            ours_runs,
            train_meta,
            warmup,
            done["reference_train_seconds"],
            done["machine"],
            command=done["command"],
        )
        return 0

    machine = machine_info()

    def report(intervals, seconds):
        save_report(args, intervals, ours, ours_runs, train_meta, warmup, seconds, machine)

    train_reference(args, train_shards, train_meta, heldout_shards, heldout_meta, warmup, ours, report)
    return 0


def train_reference(args, train_shards, train_meta, heldout_shards, heldout_meta, warmup, ours, report):
    """Model Garden's MaskedLMTask for --steps steps; calls report(intervals, seconds) after each interval."""
    seq_len = train_meta["max_seq_length"]

    import tensorflow as tf
    import tf_keras

    from official.modeling import optimization
    from official.nlp.configs import bert, encoders
    from official.nlp.data import pretrain_dataloader
    from official.nlp.tasks import masked_lm

    tf_keras.utils.set_random_seed(args.seed)
    hidden = 128  # our bert_tiny preset: 2 layers, 128 hidden, 2 heads, 512 intermediate, 512 positions
    config = masked_lm.MaskedLMConfig(
        model=bert.PretrainerConfig(
            encoder=encoders.EncoderConfig(
                type="bert",
                bert=encoders.BertEncoderConfig(
                    vocab_size=train_meta["vocabulary_size"],
                    hidden_size=hidden,
                    num_layers=2,
                    num_attention_heads=2,
                    intermediate_size=4 * hidden,
                    hidden_activation="gelu",
                    dropout_rate=0.1,
                    attention_dropout_rate=0.1,
                    max_position_embeddings=512,
                    type_vocab_size=2,
                    initializer_range=0.02,
                ),
            ),
            cls_heads=[
                bert.ClsHeadConfig(inner_dim=hidden, num_classes=2, dropout_rate=0.1, name="next_sentence")
            ],
        ),
        train_data=pretrain_dataloader.BertPretrainDataConfig(
            input_path=",".join(train_shards),
            global_batch_size=args.batch_size,
            is_training=True,
            seq_length=seq_len,
            max_predictions_per_seq=train_meta["max_predictions_per_seq"],
            seed=args.seed,
        ),
        validation_data=pretrain_dataloader.BertPretrainDataConfig(
            input_path=",".join(heldout_shards),
            global_batch_size=args.batch_size,
            is_training=False,
            seq_length=seq_len,
            max_predictions_per_seq=heldout_meta["max_predictions_per_seq"],
        ),
    )
    task = masked_lm.MaskedLMTask(config)
    model = task.build_model()
    # Model Garden's bert/pretraining optimizer (configs/pretraining_experiments.py) with the
    # settings of our run: AdamW, decay off LayerNorm/bias, global-norm clipping at 1.0,
    # epsilon 1e-6, linear warm-up, linear decay to 0. Model Garden (like Google's
    # optimization.py) counts the decay from step 0, so after warm-up its rate is
    # peak * (1 - step / schedule_steps), 10% under the peak at the end of warm-up; our
    # WarmupPolynomialDecay starts the decay at the end of warm-up (transformers' linear
    # schedule). We keep Model Garden's own shape here: this is its trainer, as shipped.
    opt_config = optimization.OptimizationConfig(
        {
            "optimizer": {
                "type": "adamw",
                "adamw": {
                    "weight_decay_rate": 0.01,
                    "exclude_from_weight_decay": ["LayerNorm", "layer_norm", "bias"],
                    "epsilon": 1e-6,
                    "gradient_clip_norm": 1.0,
                },
            },
            "learning_rate": {
                "type": "polynomial",
                "polynomial": {
                    "initial_learning_rate": args.learning_rate,
                    "decay_steps": args.schedule_steps,
                    "end_learning_rate": 0.0,
                    "power": 1.0,
                },
            },
            "warmup": {"type": "linear", "linear": {"warmup_steps": warmup}},
        }
    )
    factory = optimization.OptimizerFactory(opt_config)
    optimizer = factory.build_optimizer(factory.build_learning_rate())

    train_metrics = task.build_metrics(training=True)
    validation_metrics = task.build_metrics(training=False)
    train_iterator = iter(task.build_inputs(config.train_data))
    heldout = task.build_inputs(config.validation_data).take(args.validation_steps).cache()

    @tf.function
    def train_step(inputs):
        return task.train_step(inputs, model, optimizer, metrics=train_metrics)

    @tf.function
    def validation_step(inputs):
        return task.validation_step(inputs, model, metrics=validation_metrics)

    def values(metrics):
        return {m.name: float(m.result()) for m in metrics}

    intervals = []
    started = time.monotonic()
    n_params = sum(int(tf.size(v)) for v in model.trainable_variables)
    print(
        f"Model Garden MaskedLMTask, bert_tiny-sized ({n_params:,} trainable); {args.steps} steps of a "
        f"{args.schedule_steps}-step schedule; records {train_meta['examples']} examples",
        flush=True,
    )
    for interval in range(args.steps // args.log_every):
        for m in train_metrics:
            m.reset_state()
        t0 = time.monotonic()
        for _ in range(args.log_every):
            logs = train_step(next(train_iterator))
        train_seconds = time.monotonic() - t0
        train = values(train_metrics)
        for m in validation_metrics:
            m.reset_state()
        for batch in heldout:
            validation_step(batch)
        val = values(validation_metrics)
        step = (interval + 1) * args.log_every
        intervals.append(
            {
                "step": step,
                "seconds": round(train_seconds, 1),
                "last_loss": float(logs["loss"]),
                "learning_rate": float(optimizer.learning_rate(step))
                if callable(optimizer.learning_rate)
                else None,
                "train_mlm_accuracy": train["masked_lm_accuracy"],
                "train_nsp_accuracy": train["next_sentence_accuracy"],
                "train_nsp_loss": train["next_sentence_loss"],
                "heldout_mlm_accuracy": val["masked_lm_accuracy"],
                "heldout_nsp_accuracy": val["next_sentence_accuracy"],
            }
        )
        i = interval
        print(
            f"step {step}: train MLM {train['masked_lm_accuracy']:.4f} NSP "
            f"{train['next_sentence_accuracy']:.4f} | held-out MLM {val['masked_lm_accuracy']:.4f} NSP "
            f"{val['next_sentence_accuracy']:.4f} | ours at {step}: train NSP "
            f"{ours['train_nsp_accuracy'][i]:.4f}, held-out NSP {ours['heldout_nsp_accuracy'][i]:.4f}, "
            f"train MLM {ours['train_mlm_accuracy'][i]:.4f} ({train_seconds:.0f} s)",
            flush=True,
        )
        report(intervals, time.monotonic() - started)


def save_report(args, intervals, ours, ours_runs, train_meta, warmup, seconds, machine, command=None):
    """Writes the results file: the reference's finished intervals beside our curve. `command`:
    with --reuse, the command of the run whose intervals are kept (this one only re-read ours)."""
    reference_nsp = [r["train_nsp_accuracy"] for r in intervals]
    n = len(intervals)
    report = {
        "complete": n * args.log_every == args.steps,
        "settings": {
            "records_examples": train_meta["examples"],
            "vocabulary_size": train_meta["vocabulary_size"],
            "seq_len": train_meta["max_seq_length"],
            "batch_size": args.batch_size,
            "learning_rate": args.learning_rate,
            "schedule_steps": args.schedule_steps,
            "warmup_steps": warmup,
            "steps_run": n * args.log_every,
            "seed": args.seed,
            "model": "official.nlp.tasks.masked_lm.MaskedLMTask: BertEncoder (2 layers, hidden 128, "
            "2 heads, intermediate 512, GELU, dropout 0.1) + BertPretrainerV2 with a "
            "next_sentence ClassificationHead (inner 128); data through "
            "BertPretrainDataLoader (its own shuffle and repeat)",
            "optimizer": "official.modeling.optimization: adamw (weight decay 0.01, not on "
            "LayerNorm/bias), epsilon 1e-6, gradient_clip_norm 1.0, polynomial "
            "(power 1) decay to 0 counted from step 0, linear warm-up (ours decays from the end of warm-up)",
        },
        "reference": intervals,
        "reference_first_step_train_nsp_above": {
            str(t): first_step_above(reference_nsp, t, args.log_every) for t in (0.52, 0.55, 0.6)
        },
        "ours": ours,
        "ours_first_step_train_nsp_above": {
            str(t): first_step_above(ours["train_nsp_accuracy"], t, args.log_every) for t in (0.52, 0.55, 0.6)
        },
        "ours_other_seeds": [
            {
                **run,
                "first_step_train_nsp_above": {
                    str(t): first_step_above(run["train_nsp_accuracy"], t, args.log_every)
                    for t in (0.52, 0.55, 0.6)
                },
            }
            for run in ours_runs
        ],
        "reference_train_seconds": round(seconds, 1),
    }
    if command is not None:
        report["ours_other_seeds_read_by"] = command_line()
    write_report(args.output, BENCHMARK, report, machine, command=command)


if __name__ == "__main__":
    raise SystemExit(main())
