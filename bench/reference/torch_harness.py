"""What the PyTorch references share: Hugging Face kept offline, the command line, a warm-up
then the whole file timed under `torch.inference_mode()` in file or length order, and the
JSON line the calling bench reads. Runs in the torch venv, without TensorFlow."""

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


def run(description, load, work, batch_size, keep_blank_lines, add_arguments=None, finish=None):
    """Parses the command line, loads (`load()` -> (model, tokenizer)), warms up and times
    `work(model, tokenizer, texts, batch_size, seq_len)` over the file; prints the JSON line.
    `finish(args, outputs, order)` gets the outputs (in the order run) afterwards."""
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False)
    parser.add_argument("--sentences", required=True, help="A text file, one sentence per line.")
    parser.add_argument("--order", choices=("input", "length"), default="input")
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    with open(args.sentences, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f if keep_blank_lines or line.strip()]
    model, tokenizer = load()
    with torch.inference_mode():
        work(model, tokenizer, texts[:256], args.batch_size, args.seq_len)  # warm-up
        loaded = time.perf_counter()
        order = np.arange(len(texts))
        if args.order == "length":
            order = np.argsort(
                [-len(t) for t in texts], kind="stable"
            )  # sentence-transformers sorts by characters
        outputs = work(model, tokenizer, [texts[i] for i in order], args.batch_size, args.seq_len)
        done = time.perf_counter()
    if finish is not None:
        finish(args, outputs, order)
    print(f"pytorch ({args.order} order): {len(texts) / (done - loaded):.1f} sentences/s", file=sys.stderr)
    print(
        json.dumps(
            {
                "order": args.order,
                "sentences": len(texts),
                "batch_size": args.batch_size,
                "seq_len": args.seq_len,
                "threads": args.threads,
                "seconds": done - loaded,
                "sentences_per_second": len(texts) / (done - loaded),
                "start_up_seconds": loaded - started,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "attention": model.config._attn_implementation,
            }
        )
    )
