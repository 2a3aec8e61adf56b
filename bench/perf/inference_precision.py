"""Raw-text inference in fp32, bf16 (Keras' mixed_bfloat16), int8 (`LiteRtForward`: TFLite
dynamic-range int8 on XNNPACK, what `--precision int8` runs) and int8 through Keras' own
`model.quantize("int8")` (the route the issue named, recorded to show why it is not the one
`--precision int8` runs) on the fine-tuned MiniLM MR classifier, 2 threads, one run, alternating.

Each contender is `TextPredictor` (length-sorted batches of 32, tokenization included) on the
first --sentences of the 4,000 MR sentences, timed after a warm-up; accuracy is on the 800
held-out MR test rows of bench/experiments/distill_mr.py; agreement is the share of top
labels equal to fp32's. The int8 model is also saved and loaded back as .keras (the issue
asks for that), and the outcome recorded. Then the whole `kbert predict --file` process at
fp32 and bf16 over all the sentences.

    .venv/bin/python -m bench.perf.inference_precision --output bench/results/inference_precision.json
"""

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench.common import REPO, WORK, machine_info, wait_for_idle, write_report

RUN = os.path.join(WORK, "distill_mr", "ours-mean-seed0-wu0.0-wd0.0")
SENTENCES = os.path.join(WORK, "distill_mr", "mr_sentences.txt")
TEST = os.path.join(WORK, "distill_mr", "mr_test.csv")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--run", default=RUN)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "inference_precision.json"))
    args = parser.parse_args(argv)
    for path in (args.run, SENTENCES, TEST):
        if not os.path.exists(path):
            raise SystemExit(f"{path}: missing; `make experiment-distill-mr` writes it.")
    import keras

    from keras_bert_impl.inference import TextPredictor, with_precision

    with open(SENTENCES, encoding="utf-8") as f:
        all_texts = [line.rstrip("\n") for line in f if line.strip()]
    texts = all_texts[: args.sentences]
    with open(TEST, encoding="utf-8", newline="") as f:
        test = list(csv.reader(f))
    machine = machine_info()
    if args.wait_idle:
        wait_for_idle(args.wait_idle)

    model = keras.saving.load_model(os.path.join(args.run, "model.keras"))
    seq_len = 64
    models = {"fp32": model, "bf16": with_precision(model, "bf16")}
    int8 = keras.saving.load_model(os.path.join(args.run, "model.keras"))
    int8.quantize("int8")
    models["int8_keras_quantize"] = int8
    int8_reload = None
    with tempfile.TemporaryDirectory() as folder:
        try:
            int8.save(os.path.join(folder, "int8.keras"))
            reloaded = keras.saving.load_model(os.path.join(folder, "int8.keras"))
            sample = [text for _, text in test[:64]]
            before, after = (
                TextPredictor(m, sequence_length=seq_len, batch_size=32).predict(sample)["logits"]
                for m in (int8, reloaded)
            )
            int8_reload = (
                f"saved and loaded; max |logit change| over {len(sample)} test rows "
                f"{np.abs(before - after).max():.2e}"
            )
        except Exception as e:  # what a user would meet: recorded, not hidden
            int8_reload = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"

    predictors = {
        name: TextPredictor(m, sequence_length=seq_len, batch_size=32) for name, m in models.items()
    }
    started = time.perf_counter()
    predictors["int8"] = TextPredictor(model, sequence_length=seq_len, batch_size=32, precision="int8")
    int8_conversion = time.perf_counter() - started
    names = list(predictors)
    label_ids = {name: i for i, name in enumerate(model.label_names)}
    accuracy, top = {}, {}
    for name, predictor in predictors.items():
        logits = predictor.predict([text for _, text in test])["logits"]
        accuracy[name] = float(
            np.mean(logits.argmax(-1) == np.array([label_ids[label] for label, _ in test]))
        )
        top[name] = predictor.predict(texts)["logits"].argmax(-1)  # also the warm-up
    seconds = {name: [] for name in names}
    for _ in range(args.rounds):
        for name in names:
            started = time.perf_counter()
            predictors[name].predict(texts)
            seconds[name].append(time.perf_counter() - started)

    whole = {}
    sentences_file = SENTENCES
    for precision in ("fp32", "bf16", "int8"):
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "keras_bert_impl.cli",
                "predict",
                "--model",
                args.run,
                "--file",
                sentences_file,
                "--precision",
                precision,
            ],
            check=True,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
        )
        whole[precision] = round(time.perf_counter() - started, 2)

    best = {name: min(s) for name, s in seconds.items()}
    results = {
        "model": os.path.relpath(args.run, REPO),
        "seq_len": seq_len,
        "batch_size": 32,
        "sentences_timed": len(texts),
        "rounds": args.rounds,
        "seconds": {name: [round(s, 3) for s in values] for name, values in seconds.items()},
        "sentences_per_s": {name: round(len(texts) / s, 1) for name, s in best.items()},
        "speed_vs_fp32": {name: round(best["fp32"] / s, 3) for name, s in best.items()},
        "mr_test_accuracy": {name: round(a, 4) for name, a in accuracy.items()},
        "mr_test_rows": len(test),
        "top_label_agreement_with_fp32": {name: float(np.mean(top[name] == top["fp32"])) for name in names},
        "int8_keras_save_and_load": int8_reload,
        "int8_conversion_seconds": round(int8_conversion, 1),
        "kbert_predict_whole_process_seconds": {"sentences": len(all_texts), **whole},
    }
    for key, value in results.items():
        print(f"{key}: {value}", flush=True)
    write_report(args.output, "inference_precision", results, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
