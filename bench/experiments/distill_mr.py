"""Distillation on MR: small students from the fine-tuned MiniLM teacher, over seeds.

The teacher is `kbert finetune` of the real all-MiniLM-L6-v2 weights on the MR split and
settings of bench/experiments/finetune_mr_seeds.py (stratified 80/20 with seed 0, length 64,
batch 32, lr 5e-5, 3 epochs, mean pooling: the most seed-stable of its heads, 0.807 +- 0.001
over 5 seeds there); its training seed is fixed (--teacher-seed).

The transfer set is unlabeled in-domain text the teacher labels: the sentences of the
1,500 full reviews (polarity-en-pang&lee1.csv, bench/corpora/review_sentences.py; other
reviews than the MR sentences) plus the 3,200 MR training sentences. The teacher's logits
for it are computed once and cached in --work (the set is fixed and the teacher frozen, so
running the teacher inside every step of every epoch of every student would repeat the
same 52k forward passes; the Distiller takes them as inputs["teacher_logits"]).

Students (--students), each trained for every seed in 0..N-1:

  tiny-pca     bert_tiny (L2 H128), the teacher's embedding tables projected onto their
               top 128 principal directions, layers random;
  mini-pca     bert_mini (L4 H256), the same with 256 directions;
  teacher-l1   one layer of the teacher (its layer --l1-layer), its embeddings, H384;
  tiny, mini   the presets, random;
  tiny-general bert_tiny after task-agnostic distillation (`kbert distill --general`, TinyBERT's
               first stage): its PCA embeddings and random layers trained to reproduce the
               pre-trained all-MiniLM-L6-v2's hidden states (uniform layer map, through a
               learned projection) and embedding output on the review sentences alone
               (--general-epochs), before the task distillation above.

and two references: the same student on the 3,200 labels alone (`label-only`, for the
students in --label-only), and TF-IDF + logistic regression on the same split. Batches are
grouped by length (sorted within shuffled pools of 50 batches, padded to a multiple of 16),
which changes nothing but the padding each step multiplies.

FLOPs per sequence (length 64, batch 1, the head included) are counted by TensorFlow's
profiler on each model's traced graph (tf.profiler float_operation: a multiply-add is 2;
ops without a registered count, such as BiasAdd, Erf and Tanh, add nothing).

    .venv/bin/python -m bench.experiments.distill_mr                       # the committed run
    .venv/bin/python -m bench.experiments.distill_mr --subset 200 --transfer-limit 400 \\
        --seeds 1 --epochs 1 --label-epochs 1 --work data/bench/distill_smoke --output /tmp/d.json  # smoke
"""

import argparse
import hashlib
import json
import os
import statistics
import time

import numpy as np

from bench.common import MINILM, RESULTS, WORK, kbert, machine_info, write_report
from bench.corpora.mr_split import write_mr_split
from bench.corpora.review_sentences import review_sentences, write_sentences
from bench.mr_finetune import finetune_command, finetune_ours, run_folder
from keras_bert_impl.tensor_names import MODEL_ID_INPUTS

SEQ_LEN, BATCH_SIZE = 64, 32
STUDENTS = ("tiny-pca", "mini-pca", "teacher-l1", "tiny", "mini", "tiny-general")
PRESET = {"tiny-pca": "bert_tiny", "mini-pca": "bert_mini", "tiny": "bert_tiny", "mini": "bert_mini"}


def general_run(work, epochs, limit):
    """`kbert distill --general` of bert_tiny from the pre-trained MiniLM on the review
    sentences (run once, kept; an unfinished run resumes); returns its run folder."""
    run = os.path.join(work, f"general-tiny-e{epochs}" + (f"-limit{limit}" if limit else ""))
    if not os.path.isfile(os.path.join(run, "metrics.json")):
        texts = os.path.join(work, f"review_sentences{f'-{limit}' if limit else ''}.txt")
        write_sentences(texts, limit=limit)
        kbert(
            "distill",
            "--general",
            "--teacher",
            MINILM,
            "--student-preset",
            "bert_tiny",
            "--unlabeled",
            texts,
            "--hidden-weight",
            "1",
            "--embedding-weight",
            "1",
            "--epochs",
            epochs,
            "--seq-len",
            SEQ_LEN,
            "--batch-size",
            BATCH_SIZE,
            "--seed",
            0,
            "--output",
            run,
            "--quiet",
        )
    return run


def build_student(kind, teacher, seed, l1_layer, general=None):
    """A BertClassifier like the teacher's head (classes, labels, mean pooling) on the student
    backbone (`general`: the run folder of tiny-general's encoder)."""
    import keras

    import keras_bert_impl as kb
    from keras_bert_impl.models import backbone_from_layers, embeddings_from_teacher

    keras.utils.set_random_seed(seed)
    source = teacher.backbone
    info = {}
    if kind == "tiny-general":
        backbone = keras.saving.load_model(os.path.join(general, "model.keras"))
        with open(os.path.join(general, "metrics.json"), encoding="utf-8") as f:
            general_metrics = json.load(f)
        info["init"] = (
            "kbert distill --general of bert_tiny (PCA embeddings) from the pre-trained all-MiniLM-L6-v2 "
            "on the review sentences"
        )
        info["general_distillation"] = {
            key: general_metrics[key]
            for key in (
                "history",
                "epochs",
                "layer_map",
                "hidden_weight",
                "embedding_weight",
                "learning_rate",
                "seconds",
            )
        }
    elif kind == "teacher-l1":
        backbone = backbone_from_layers(source, (l1_layer,))
        info["init"] = f"the teacher's embeddings and its layer {l1_layer}"
    else:
        backbone = kb.BertBackbone.from_preset(PRESET[kind], vocabulary_size=source.vocabulary_size)
        backbone.set_vocabulary(source.vocabulary, source.lowercase)
        if kind.endswith("-pca"):
            info["pca_variance_kept"] = embeddings_from_teacher(source, backbone)
            info["init"] = "the teacher's embeddings projected by PCA, layers random"
        else:
            info["init"] = "random"
    student = kb.BertClassifier(
        backbone, num_classes=teacher.num_classes, label_names=teacher.label_names, pooling="mean"
    )
    return student, info


def learning_rate(kind):
    # Turc et al. fine-tune the compact BERTs at 1e-4 .. 3e-4; random layers take the upper
    # end. One teacher layer under a new head at the teacher's own 5e-5 reached only 0.6825
    # (seed 0): it has to move far from the layer it was, so it gets 2e-4; so does the
    # generally distilled student, whose layers are trained already (kbert distill's rates).
    return 2e-4 if kind.startswith("teacher") or kind.endswith("general") else 3e-4


def length_batches(lengths, batch_size, seed, pool=50, multiple=16):
    """Batches of row indices: shuffled, sorted by length within pools of `pool` batches, in
    shuffled order; each with the padded length it needs (a multiple of `multiple`)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths))
    batches = []
    for start in range(0, len(order), batch_size * pool):
        chunk = order[start : start + batch_size * pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        for b in range(0, len(chunk), batch_size):
            rows = chunk[b : b + batch_size]
            batches.append((rows, int(min(SEQ_LEN, -(-lengths[rows].max() // multiple) * multiple))))
    return [batches[i] for i in rng.permutation(len(batches))]


def dataset(x, extra, lengths, seed, epochs):
    """A tf.data pipeline of length-grouped batches for `epochs` epochs (new order each epoch)."""
    import tensorflow as tf

    def rows():
        for epoch in range(epochs):
            for index, width in length_batches(lengths, BATCH_SIZE, seed * 1000 + epoch):
                batch = {k: v[index, :width] for k, v in x.items()}
                for key, value in extra.items():
                    if key != "labels":
                        batch[key] = value[index]
                yield (batch, extra["labels"][index]) if "labels" in extra else (batch,)

    first = next(rows())
    signature = tuple(
        {
            k: tf.TensorSpec((None,) + v.shape[1:] if k == "teacher_logits" else (None, None), v.dtype)
            for k, v in part.items()
        }
        if isinstance(part, dict)
        else tf.TensorSpec((None,), part.dtype)
        for part in first
    )
    steps = len(length_batches(lengths, BATCH_SIZE, 0))
    return tf.data.Dataset.from_generator(rows, output_signature=signature).prefetch(2), steps


def accuracy(model, x, label_ids):
    logits = model.predict(x, batch_size=128, verbose=0)["logits"]
    return float((logits.argmax(-1) == label_ids).mean())


def train(model, data, steps, epochs, lr):
    """Fits with Adam (clipnorm 1.0, linear decay to 0); the model's own loss and metrics."""
    import keras

    schedule = keras.optimizers.schedules.PolynomialDecay(
        lr, decay_steps=steps * epochs, end_learning_rate=0.0
    )
    model.compile(optimizer=keras.optimizers.Adam(schedule, clipnorm=1.0))
    started = time.perf_counter()
    model.fit(data, epochs=epochs, steps_per_epoch=steps, verbose=0)
    return time.perf_counter() - started


def count_flops(model):
    """Float operations of one length-64 sequence through `model` (TensorFlow's profiler)."""
    import tensorflow as tf
    from tensorflow.python.profiler import model_analyzer, option_builder

    spec = {k: tf.TensorSpec([1, SEQ_LEN], tf.int32) for k in MODEL_ID_INPUTS}
    graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec).graph
    options = option_builder.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    return int(model_analyzer.profile(graph, options=options).total_float_ops)


def predict_speed(models, texts_path, rounds):
    """Seconds of `kbert predict --file` (4,000 MR sentences, length 64, batch 32) per model,
    whole process (imports and model load included) and its predict loop alone, the models
    alternating round by round so that load on the machine falls on each alike."""
    import subprocess
    import sys

    times = {name: [] for name in models}
    for _ in range(rounds):
        for name, path in models.items():
            started = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "keras_bert_impl.cli",
                    "predict",
                    "--model",
                    path,
                    "--file",
                    texts_path,
                    "--seq-len",
                    str(SEQ_LEN),
                    "--batch-size",
                    "32",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
            )
            times[name].append(time.perf_counter() - started)
    return {
        name: {"seconds": values, "median_seconds": statistics.median(values)}
        for name, values in times.items()
    }


def int8_tflite_bytes(model_path, output):
    """Size of the dynamic-int8 .tflite `kbert export` writes for the model (kept in `output`)."""
    import glob
    import subprocess
    import sys

    if not glob.glob(os.path.join(output, "tflite", "*.tflite")):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "keras_bert_impl.cli",
                "export",
                "--model",
                model_path,
                "--output",
                output,
                "--formats",
                "tflite",
                "--quantizations",
                "dynamic_int8",
                "--seq-len",
                str(SEQ_LEN),
                "--overwrite",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        )
    (path,) = glob.glob(os.path.join(output, "tflite", "*.tflite"))
    return os.path.getsize(path)


def tfidf_accuracy(texts, labels, train_idx, test_idx):
    from bench.experiments.mr_baseline import tfidf_lr_accuracy

    return tfidf_lr_accuracy(texts, labels, train_idx, test_idx)


def summary(values):
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
        "runs": len(values),
    }


def predict_speeds(args, texts, teacher_run, models):
    """`kbert predict --file` timed on the teacher and every seed-0 distilled student; their int8
    TFLite sizes go into `models`."""
    texts_path = os.path.join(args.work, "mr_sentences.txt")
    with open(texts_path, "w", encoding="utf-8") as f:
        f.write("\n".join(t.replace("\n", " ") for t in texts) + "\n")
    seed0 = {
        kind: os.path.join(
            args.work,
            "students",
            f"{kind}-distilled-seed0-e{args.epochs}-T{args.temperature}"
            + (f"-lr{learning_rate(kind)}" if kind.startswith("teacher") else "")
            + (f"-general-e{args.general_epochs}" if kind == "tiny-general" else ""),
            "model.keras",
        )
        for kind in args.students
    }
    speed = predict_speed({"teacher": teacher_run, **seed0}, texts_path, args.speed_rounds)
    for name, path in {"teacher": teacher_run, **seed0}.items():
        models[name]["int8_tflite_bytes"] = int8_tflite_bytes(path, os.path.join(args.work, "export", name))
    for name, body in speed.items():
        body["speedup_over_teacher"] = speed["teacher"]["median_seconds"] / body["median_seconds"]
        print(
            f"kbert predict --file ({len(texts)} sentences) {name}: {body['median_seconds']:.1f} s "
            f"({body['speedup_over_teacher']:.2f}x the teacher's speed)",
            flush=True,
        )
    return speed


def print_table(teacher_accuracy, tfidf, table, models):
    print(f"teacher {teacher_accuracy:.4f}  TF-IDF + LR {tfidf:.4f}")
    for kind, body in table.items():
        for mode, s in body.items():
            print(
                f"{kind:11s} {mode:10s} {s['mean']:.4f} +- {s['sd']:.4f} ({100 * s['of_teacher']:.1f}% of "
                f"the teacher; {models[kind]['flops_ratio_teacher_to_this']:.1f}x fewer FLOPs, "
                f"{models[kind]['parameters']:,} parameters)"
            )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--output", default=os.path.join(RESULTS, "distill_mr.json"))
    parser.add_argument("--work", default=os.path.join(WORK, "distill_mr"))
    parser.add_argument(
        "--students", nargs="+", choices=STUDENTS, default=["tiny-pca", "teacher-l1", "tiny", "tiny-general"]
    )
    parser.add_argument(
        "--label-only",
        nargs="*",
        choices=STUDENTS,
        default=["tiny-pca", "tiny", "tiny-general"],
        help="Students also trained on the labels alone.",
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2, help="Epochs over the transfer set.")
    parser.add_argument(
        "--label-epochs", type=int, default=10, help="Epochs of label-only training (3,200 rows)."
    )
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--teacher-seed", type=int, default=0)
    parser.add_argument("--l1-layer", type=int, default=0)
    parser.add_argument(
        "--general-epochs", type=int, default=3, help="Epochs of tiny-general's general distillation."
    )
    parser.add_argument(
        "--speed-rounds",
        type=int,
        default=3,
        help="Rounds of `kbert predict --file` over the 4,000 MR sentences per model (0: none).",
    )
    parser.add_argument(
        "--subset", type=int, default=None, help="Smoke run: the first N of each part of the split."
    )
    parser.add_argument(
        "--transfer-limit", type=int, default=None, help="Smoke run: the first N review sentences."
    )
    args = parser.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    machine = machine_info()

    import keras
    import tensorflow as tf

    from keras_bert_impl.atomic_write import write_json_atomically
    from keras_bert_impl.models import Distiller, LogitsTerm
    from keras_bert_impl.tokenization import BertPreprocessor

    texts, labels, train_idx, test_idx, train_csv, test_csv = write_mr_split(args.work, subset=args.subset)
    teacher_run = run_folder(args.work, "mean", args.teacher_seed)
    teacher_metrics = finetune_ours(
        finetune_command(train_csv, test_csv, teacher_run, 3, "mean", args.teacher_seed),
        teacher_run,
        reuse=True,
    )
    teacher = keras.saving.load_model(os.path.join(teacher_run, "model.keras"))
    label_ids = np.array([teacher.label_names.index(str(v)) for v in labels])
    preprocessor = BertPreprocessor(
        teacher.backbone.vocabulary, teacher.backbone.lowercase, sequence_length=SEQ_LEN
    )

    def encode(strings):
        parts = [preprocessor(tf.constant(strings[i : i + 1024])) for i in range(0, len(strings), 1024)]
        return {k: np.concatenate([p[k].numpy() for p in parts]) for k in parts[0]}

    reviews = review_sentences(limit=args.transfer_limit)
    transfer_texts = reviews + [texts[i] for i in train_idx]
    x_transfer, x_train, x_test = (
        encode(transfer_texts),
        encode([texts[i] for i in train_idx]),
        encode([texts[i] for i in test_idx]),
    )
    y_train, y_test = label_ids[train_idx], label_ids[test_idx]

    # The teacher's logits for the transfer set, once (keyed by the teacher and the texts).
    key = hashlib.sha256(("\n".join(transfer_texts) + teacher_run).encode()).hexdigest()[:16]
    cache = os.path.join(args.work, f"teacher_logits-{key}.npy")
    if not os.path.isfile(cache):
        started = time.perf_counter()
        logits = teacher.predict(x_transfer, batch_size=128, verbose=0)["logits"]
        np.save(cache + ".tmp.npy", logits)
        os.replace(cache + ".tmp.npy", cache)
        print(
            f"teacher logits for {len(transfer_texts)} sentences: {time.perf_counter() - started:.0f} s",
            flush=True,
        )
    teacher_logits = np.load(cache)
    teacher_accuracy = accuracy(teacher, x_test, y_test)
    print(
        f"teacher test accuracy {teacher_accuracy:.4f} (metrics.json: "
        f"{teacher_metrics['validation']['accuracy']:.4f})",
        flush=True,
    )

    lengths_transfer = x_transfer["padding_mask"].sum(1)
    lengths_train = x_train["padding_mask"].sum(1)
    runs_path = os.path.join(args.work, "runs.json")
    runs = json.load(open(runs_path)) if os.path.isfile(runs_path) else {}
    models = {"teacher": {"parameters": teacher.count_params(), "flops_per_sequence": count_flops(teacher)}}

    general = (
        general_run(args.work, args.general_epochs, args.transfer_limit)
        if "tiny-general" in args.students
        else None
    )

    def run(kind, mode, seed):
        epochs = args.epochs if mode == "distilled" else args.label_epochs
        name = f"{kind}/{mode}/seed{seed}/e{epochs}/T{args.temperature}"
        if kind.startswith("teacher"):
            name += f"/lr{learning_rate(kind)}"
        if kind == "tiny-general":
            name += f"/general-e{args.general_epochs}"
        student, info = build_student(kind, teacher, seed, args.l1_layer, general)
        if kind not in models:
            models[kind] = {
                "parameters": student.count_params(),
                "flops_per_sequence": count_flops(student),
                **info,
            }
        if name in runs:
            return runs[name]
        if mode == "distilled":
            model = Distiller(teacher, student, [LogitsTerm(args.temperature, alpha=0.0)])
            data, steps = dataset(
                x_transfer, {"teacher_logits": teacher_logits}, lengths_transfer, seed, args.epochs
            )
            seconds = train(model, data, steps, args.epochs, learning_rate(kind))
        else:
            model = student
            data, steps = dataset(x_train, {"labels": y_train}, lengths_train, seed, args.label_epochs)
            seconds = train(model, data, steps, args.label_epochs, learning_rate(kind))
        result = {"test_accuracy": accuracy(student, x_test, y_test), "train_seconds": round(seconds, 1)}
        folder = os.path.join(args.work, "students", name.replace("/", "-"))
        os.makedirs(folder, exist_ok=True)
        student.save(os.path.join(folder, "model.keras"))
        runs[name] = result
        write_json_atomically(runs, runs_path, indent=2)
        print(f"{name}: {result['test_accuracy']:.4f} ({seconds:.0f} s)", flush=True)
        return result

    table = {}
    for kind in args.students:
        modes = ["distilled"] + (["label-only"] if kind in args.label_only else [])
        for mode in modes:
            accs = [run(kind, mode, seed)["test_accuracy"] for seed in range(args.seeds)]
            table.setdefault(kind, {})[mode] = {
                **summary(accs),
                "runs": accs,
                "of_teacher": statistics.fmean(accs) / teacher_accuracy,
            }
    tfidf = tfidf_accuracy(texts, labels, train_idx, test_idx)
    for kind, body in models.items():
        body["flops_ratio_teacher_to_this"] = (
            models["teacher"]["flops_per_sequence"] / body["flops_per_sequence"]
        )

    speed = predict_speeds(args, texts, teacher_run, models) if args.speed_rounds else None

    results = {
        "settings": {
            "split": "scikit-learn stratified 80/20, seed 0 (bench/corpora/mr_split.py)",
            "train_examples": len(train_idx),
            "test_examples": len(test_idx),
            "subset": args.subset,
            "transfer_sentences": len(transfer_texts),
            "review_sentences": len(reviews),
            "seq_len": SEQ_LEN,
            "batch_size": BATCH_SIZE,
            "epochs_transfer": args.epochs,
            "epochs_label_only": args.label_epochs,
            "temperature": args.temperature,
            "alpha": 0.0,
            "optimizer": "Adam, clipnorm 1.0, linear decay to 0; lr 3e-4 (random layers), 2e-4 (teacher "
            "layers, generally distilled layers)",
            "general_epochs": args.general_epochs,
            "seeds": list(range(args.seeds)),
            "teacher_seed": args.teacher_seed,
            "teacher_logits": "computed once for the fixed transfer set and cached",
        },
        "teacher": {"run": os.path.relpath(teacher_run, args.work), "test_accuracy": teacher_accuracy},
        "tfidf_logistic_regression": {"test_accuracy": tfidf},
        "models": models,
        "students": table,
        "predict_speed": speed
        and {
            "what": f"kbert predict --file over the {len(texts)} MR sentences, --seq-len "
            f"{SEQ_LEN}, batch 32, whole process, median of {args.speed_rounds} "
            "alternating rounds",
            **speed,
        },
    }
    write_report(
        args.output, "MR sentence polarity: students distilled from the fine-tuned MiniLM", results, machine
    )
    print_table(teacher_accuracy, tfidf, table, models)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
