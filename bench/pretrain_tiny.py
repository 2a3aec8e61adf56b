"""Pretrain bert_tiny from scratch on the movie reviews, then fine-tune it on MR
against the same backbone with random weights: the training issue's pretraining item.

Everything runs through the `kbert` commands a user would type:
1. `kbert pretrain-data` on the held-out reviews (every 10th review of
   polarity-en-pang&lee1.csv) -> validation records;
2. `kbert pretrain --corpus` on the other 90% with the MiniLM uncased vocabulary,
   `--preset bert_tiny`, from scratch;
3. `kbert finetune` on MR (the scikit-learn stratified 80/20 split with seed 0 of
   bench/mr_split.py) from the pretrained model and from a randomly initialised
   bert_tiny with the same vocabulary, with identical settings.

    .venv/bin/python bench/pretrain_tiny.py --output bench/results/pretrain_tiny.json
"""

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))

from machine import read_loadavg  # noqa: E402
from mr_split import load_mr, mr_split, write_csv  # noqa: E402

REVIEWS = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee1.csv")
VOCAB = os.path.join(REPO, "data", "minilm", "vocab.txt")


def kbert(*argv):
    command = [sys.executable, "-m", "keras_bert_impl.cli", *map(str, argv)]
    print("+ kbert " + " ".join(map(str, argv)), flush=True)
    started = time.monotonic()
    subprocess.run(command, check=True)
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=os.path.join(REPO, "bench", "results", "pretrain_tiny.json"))
    parser.add_argument("--work", default=os.path.join(REPO, "data", "bench", "pretrain_tiny"), help="Run folders.")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--steps-per-epoch", type=int, default=500)
    parser.add_argument("--pretrain-learning-rate", type=float, default=5e-4)
    parser.add_argument("--finetune-learning-rate", type=float, default=1e-4)
    parser.add_argument("--finetune-epochs", type=int, default=3)
    args = parser.parse_args()
    work = args.work
    os.makedirs(work, exist_ok=True)

    with open(REVIEWS, encoding="utf-8-sig", newline="") as f:
        reviews = list(csv.reader(f))
    write_csv(os.path.join(work, "reviews_train.csv"), [r for i, r in enumerate(reviews) if i % 10 != 9])
    write_csv(os.path.join(work, "reviews_heldout.csv"), [r for i, r in enumerate(reviews) if i % 10 == 9])
    texts, labels = load_mr()
    train_idx, test_idx = mr_split(texts, labels, seed=0)
    for name, index in (("mr_train.csv", train_idx), ("mr_test.csv", test_idx)):
        write_csv(os.path.join(work, name), [(str(labels[i]), texts[i]) for i in index])

    heldout = os.path.join(work, "heldout_records")
    if not os.path.isfile(os.path.join(heldout, "pretraining.json")):
        kbert("pretrain-data", os.path.join(work, "reviews_heldout.csv"), "--format", "reviews-csv", "--vocab", VOCAB,
              "--output", heldout, "--dupe-factor", "1", "--max-seq-length", 128, "--num-shards", 1, "--quiet")
    pretrain_dir = os.path.join(work, "pretrain")
    pretrain_seconds = kbert(
        "pretrain", "--corpus", os.path.join(work, "reviews_train.csv"), "--corpus-format", "reviews-csv",
        "--vocab", VOCAB, "--preset", "bert_tiny", "--output", pretrain_dir, "--steps", args.steps,
        "--steps-per-epoch", args.steps_per_epoch, "--batch-size", 32, "--seq-len", 128,
        "--learning-rate", args.pretrain_learning_rate, "--validation-records", heldout, "--quiet",
    )
    with open(os.path.join(pretrain_dir, "metrics.json")) as f:
        pretrain = json.load(f)

    # The same architecture and vocabulary with random weights (what pretraining starts from).
    random_init = os.path.join(work, "bert_tiny_random.keras")
    subprocess.run([sys.executable, "-c", (
        "import keras, keras_bert_impl as kb; from keras_bert_impl.checkpoints.vocabulary import read_vocabulary;"
        "keras.utils.set_random_seed(0); b = kb.BertBackbone.from_preset('bert_tiny');"
        f"b.set_vocabulary(read_vocabulary({VOCAB!r}), lowercase=True); b.save({random_init!r})"
    )], check=True)

    finetuned = {}
    for name, init in (("pretrained", pretrain_dir), ("random_init", random_init)):
        run = os.path.join(work, f"mr_{name}")
        kbert("finetune", "--task", "classification", "--train", os.path.join(work, "mr_train.csv"),
              "--validation", os.path.join(work, "mr_test.csv"), "--init", init, "--output", run, "--no-header",
              "--columns", "label,text", "--epochs", args.finetune_epochs, "--batch-size", 32, "--seq-len", 64,
              "--learning-rate", args.finetune_learning_rate, "--quiet")
        with open(os.path.join(run, "metrics.json")) as f:
            finetuned[name] = json.load(f)["validation"]

    history = pretrain["history"]
    report = {
        "task": "bert_tiny pretrained from scratch (MLM + NSP) on 90% of the movie reviews, then fine-tuned on MR",
        "command": f"python bench/pretrain_tiny.py --work {os.path.relpath(args.work, REPO)} --steps {args.steps} --steps-per-epoch {args.steps_per_epoch} "
                   f"--pretrain-learning-rate {args.pretrain_learning_rate} --finetune-learning-rate "
                   f"{args.finetune_learning_rate} --finetune-epochs {args.finetune_epochs}",
        "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"nproc": os.cpu_count(), "platform": platform.platform(),
                    "loadavg_at_end": read_loadavg()},
        "pretraining": {
            "steps": args.steps, "batch_size": 32, "seq_len": 128, "learning_rate": args.pretrain_learning_rate,
            "records_examples": None, "seconds": pretrain_seconds,
            "unigram_baseline_mlm_accuracy": pretrain["unigram_baseline_mlm_accuracy"],
            "unigram_baseline_token": pretrain["unigram_baseline_token"],
            "train_mlm_accuracy_per_epoch": history.get("mlm_logits_accuracy"),
            "train_nsp_accuracy_per_epoch": history.get("nsp_logits_accuracy"),
            "heldout_mlm_accuracy_per_epoch": history.get("val_mlm_logits_accuracy"),
            "heldout_nsp_accuracy_per_epoch": history.get("val_nsp_logits_accuracy"),
        },
        "mr_finetune": {
            "settings": {"split": "scikit-learn stratified 80/20, seed 0 (bench/mr_split.py)", "epochs": args.finetune_epochs,
                         "batch_size": 32, "seq_len": 64, "learning_rate": args.finetune_learning_rate},
            "pretrained_accuracy": finetuned["pretrained"]["accuracy"],
            "random_init_accuracy": finetuned["random_init"]["accuracy"],
            "pretrained": finetuned["pretrained"],
            "random_init": finetuned["random_init"],
        },
    }
    with open(os.path.join(pretrain_dir, "records", "pretraining.json")) as f:
        report["pretraining"]["records_examples"] = json.load(f)["examples"]
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    os.replace(tmp, args.output)
    p = report["pretraining"]
    print(f"held-out MLM accuracy {p['heldout_mlm_accuracy_per_epoch'][-1]:.4f} (unigram baseline "
          f"{p['unigram_baseline_mlm_accuracy']:.4f}), NSP {p['heldout_nsp_accuracy_per_epoch'][-1]:.4f}; MR accuracy "
          f"pretrained {report['mr_finetune']['pretrained_accuracy']:.4f} vs random init "
          f"{report['mr_finetune']['random_init_accuracy']:.4f}")


if __name__ == "__main__":
    main()
