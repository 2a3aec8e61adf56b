"""Reference raw-text classification: PyTorch + transformers on the all-MiniLM-L6-v2 shape, for
the inference throughput bench (bench/perf/inference_throughput.py).

BertForSequenceClassification (2 labels; default attention: SDPA) and BertTokenizerFast from
the local data/minilm folder (no hub; the classification head is new, which changes nothing
of the speed), eval mode, `torch.inference_mode()`, --threads intra-op threads. Batches of
--batch-size texts, each padded to its longest text (truncation at --seq-len), labels out
(argmax); --order input keeps the file's order (a plain transformers loop), --order length
sorts by length first. Tokenization is timed with the model.

Runs in the torch venv without TensorFlow; prints one JSON line for the calling bench:

    .venv-torch/bin/python -m bench.reference.classify_pytorch --sentences data/bench/distill_mr/mr_sentences.txt
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import BertForSequenceClassification, BertTokenizerFast  # noqa: E402

from bench.common import MINILM  # noqa: E402


def classify(model, tokenizer, texts, batch_size, seq_len):
    labels = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start:start + batch_size], padding="longest", truncation=True, max_length=seq_len,
                          return_tensors="pt")
        labels.append(model(**batch).logits.argmax(-1))
    return torch.cat(labels).numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", required=True, help="A text file, one sentence per line.")
    parser.add_argument("--order", choices=("input", "length"), default="input")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    with open(args.sentences, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f if line.strip()]
    tokenizer = BertTokenizerFast.from_pretrained(MINILM)
    model = BertForSequenceClassification.from_pretrained(MINILM, num_labels=2).eval()
    with torch.inference_mode():
        classify(model, tokenizer, texts[:256], args.batch_size, args.seq_len)  # warm-up
        loaded = time.perf_counter()
        order = np.arange(len(texts))
        if args.order == "length":
            order = np.argsort([-len(t) for t in texts], kind="stable")
        classify(model, tokenizer, [texts[i] for i in order], args.batch_size, args.seq_len)
        done = time.perf_counter()
    print(f"pytorch ({args.order} order): {len(texts) / (done - loaded):.1f} sentences/s", file=sys.stderr)
    print(json.dumps({
        "order": args.order, "sentences": len(texts), "batch_size": args.batch_size, "seq_len": args.seq_len,
        "threads": args.threads, "seconds": done - loaded, "sentences_per_second": len(texts) / (done - loaded),
        "start_up_seconds": loaded - started, "torch": torch.__version__, "transformers": transformers.__version__,
        "attention": model.config._attn_implementation,
    }))


if __name__ == "__main__":
    main()
