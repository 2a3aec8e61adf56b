"""Raw MR text -> labels: ours (fp32 and bf16) vs PyTorch + transformers vs KerasHub's
BertTextClassifier, MiniLM-L6 shape, the 4,000 MR sentences, 2 threads, one run, alternating.

Ours: `TextPredictor` on the fine-tuned MiniLM run (length-sorted batches of 32 padded to a
multiple of 16, truncation at 128, tokenization included), fp32 and `with_precision(..., "bf16")`,
timed in this process after a warm-up. KerasHub: `BertTextClassifier` with its
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

    backbone = keras_hub.models.BertBackbone(vocabulary_size=30522, num_layers=6, num_heads=12, hidden_dim=384,
                                             intermediate_dim=1536, max_sequence_length=512)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=MINILM_VOCAB, lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=sequence_length)
    return keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=preprocessor)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", required=True, help="Python of .venv-torch (make .venv-torch/.installed).")
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
    ours = {"ours_fp32": TextPredictor(model, sequence_length=128, batch_size=32),
            "ours_bf16": TextPredictor(with_precision(model, "bf16"), sequence_length=128, batch_size=32)}
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
            result = run_json_child([args.torch_python, "-m", "bench.reference.classify_pytorch", "--sentences",
                                     SENTENCES, "--order", order, "--batch-size", "32", "--seq-len", "128"])
            seconds[f"pytorch_{order}_order"].append(result["seconds"])
            torch_info = {k: result[k] for k in ("torch", "transformers", "attention", "threads")}
    rate = {name: len(texts) / min(values) for name, values in seconds.items()}
    peers = {name: r for name, r in rate.items() if not name.startswith("ours")}
    best_peer = max(peers, key=peers.get)
    results = {
        "sentences": len(texts), "batch_size": 32, "truncation": 128, "rounds": args.rounds,
        "seconds": {name: [round(s, 3) for s in values] for name, values in seconds.items()},
        "sentences_per_s": {name: round(r, 1) for name, r in rate.items()},
        "fastest_peer": best_peer,
        "ours_fp32_over_fastest_peer": round(rate["ours_fp32"] / peers[best_peer], 3),
        "ours_bf16_over_ours_fp32": round(rate["ours_bf16"] / rate["ours_fp32"], 3),
        "pytorch": torch_info,
        "targets": {"ours_fp32_sentences_per_s": 400, "ours_fp32_over_fastest_peer": 2.0, "best_low_precision_over_fp32": 2.0},
    }
    for key, value in results.items():
        print(f"{key}: {value}", flush=True)
    write_report(args.output, "inference_throughput", results, machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
