"""`make demo`: the product's pipeline on the real data of ../shared/DATA.md.

The converted all-MiniLM-L6-v2 is fine-tuned on MR sentence polarity (`kbert finetune`, one
epoch at 64 tokens to stay within a few minutes on two cores), exported to every format
(`kbert export`, with the report measured on the held-out sentences), and then a few raw
sentences are classified through the exported raw-text SavedModel and the int8 .tflite.
"""

import argparse
import csv
import os
import sys
import time

import numpy as np

from keras_bert_impl.atomic_write import write_atomically
from keras_bert_impl.cli import main as kbert

SENTENCES = [
    "A moving, beautifully acted film that stays with you.",
    "Two hours of my life I will never get back.",
    "the plot is thin , but the performances are wonderful .",
    "an overlong , self-indulgent mess .",
]


def write_split(corpus, folder, validation_examples, seed=0):
    """MR's rows shuffled with `seed` (the file is sorted by label): the last
    `validation_examples` held out; written as headerless label,text CSVs."""
    with open(corpus, encoding="utf-8-sig", newline="") as f:
        rows = [(label, text.strip()) for label, text in csv.reader(f)]
    order = np.random.default_rng(seed).permutation(len(rows))
    rows = [rows[i] for i in order]
    paths = {}
    for part, chosen in (("train", rows[:-validation_examples]), ("validation", rows[-validation_examples:])):
        paths[part] = os.path.join(folder, f"mr_{part}.csv")

        def write(tmp, chosen=chosen):
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                csv.writer(f, quoting=csv.QUOTE_ALL).writerows(chosen)

        write_atomically(paths[part], write, suffix=".csv")
    return paths


def step(title):
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--model", required=True, help=".keras backbone from `kbert convert`.")
    parser.add_argument("--corpus", required=True, help="MR sentence-polarity CSV (label,text).")
    parser.add_argument("--work", required=True, help="Folder for the split, the run and the export.")
    parser.add_argument("--epochs", type=int, default=1, help="Fine-tuning epochs. Default 1.")
    parser.add_argument("--seq-len", type=int, default=64, help="Tokens per sentence. Default 64.")
    parser.add_argument(
        "--validation-examples", type=int, default=800, help="Held-out MR sentences. Default 800."
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    os.makedirs(args.work, exist_ok=True)
    split = write_split(args.corpus, args.work, args.validation_examples)
    run = os.path.join(args.work, "mr_run")
    export = os.path.join(args.work, "mr_export")

    t = step(f"kbert finetune: MiniLM on {args.validation_examples} held-out / the rest of MR for training")
    code = kbert(
        [
            "finetune",
            "--task",
            "classification",
            "--init",
            args.model,
            "--train",
            split["train"],
            "--validation",
            split["validation"],
            "--no-header",
            "--columns",
            "label,text",
            "--seq-len",
            str(args.seq_len),
            "--epochs",
            str(args.epochs),
            "--pooling",
            "mean",
            "--output",
            run,
        ]
    )
    if code:
        return code
    print(f"fine-tuned in {time.perf_counter() - t:.0f} s")

    t = step("kbert export: every format, checked and measured on the held-out sentences")
    code = kbert(
        [
            "export",
            "--model",
            run,
            "--output",
            export,
            "--validation",
            split["validation"],
            "--overwrite",
            "--name",
            "mr",
        ]
    )
    if code:
        return code
    print(f"exported in {time.perf_counter() - t:.0f} s")

    step("Raw sentences through the exported models")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  the raw-text SavedModel's tokenizer ops, registered before loading
    from ai_edge_litert.interpreter import Interpreter

    from keras_bert_impl.tokenization import BertPreprocessor

    text_model = tf.saved_model.load(os.path.join(export, "serving", "mr", "1")).signatures["serving_default"]
    served = text_model(text=tf.constant(SENTENCES))
    preprocessor = BertPreprocessor(os.path.join(export, "vocab.txt"), sequence_length=args.seq_len)
    x = preprocessor(tf.constant(SENTENCES))
    runner = Interpreter(
        model_path=os.path.join(export, "tflite", "mr_dynamic_int8.tflite")
    ).get_signature_runner("serving_default")
    lite = runner(
        ids=x["token_ids"].numpy(), mask=x["padding_mask"].numpy(), segment_ids=x["segment_ids"].numpy()
    )
    with open(os.path.join(export, "labels.txt"), encoding="utf-8") as f:
        names = f.read().split()
    print("label 1 = positive, -1 = negative (MR's own labels)")
    print(f"{'sentence':58} {'SavedModel (text in)':>22} {'int8 .tflite':>16}")
    for i, sentence in enumerate(SENTENCES):
        label = served["top_label"].numpy()[i].decode()
        score = served["top_score"].numpy()[i]
        lite_top = int(lite["probabilities"][i].argmax())
        print(
            f"{sentence[:57]:58} {label:>12} ({score:.3f}) {names[lite_top]:>8} "
            f"({lite['probabilities'][i][lite_top]:.3f})"
        )
    print(
        f"\nmake demo: {time.perf_counter() - started:.0f} s in all; report: "
        f"{os.path.join(export, 'report.md')}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
