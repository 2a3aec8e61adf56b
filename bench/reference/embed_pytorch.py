"""Reference sentence embedding: PyTorch + transformers on all-MiniLM-L6-v2, mean pooling and
L2 normalisation (the model's published recipe), for the embedding throughput bench.

BertModel (default attention: SDPA) and BertTokenizerFast from the local data/minilm folder (no hub), eval mode,
`torch.inference_mode()`, --threads intra-op threads. Batches of --batch-size texts, each
padded to its longest text, truncation at --seq-len; --order input keeps the file's order (what
a plain transformers loop does), --order length sorts by length first (what
sentence-transformers' encode() does). Tokenization is timed with the model.

Runs in the torch venv without TensorFlow; prints one JSON line for the calling bench:

    .venv-torch/bin/python -m bench.reference.embed_pytorch --sentences data/bench/reviews_10k.txt --order input
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
from transformers import BertModel, BertTokenizerFast  # noqa: E402

from bench.common import MINILM  # noqa: E402


def embed(model, tokenizer, texts, batch_size, seq_len):
    out = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start:start + batch_size], padding="longest", truncation=True, max_length=seq_len,
                          return_tensors="pt")
        hidden = model(**batch).last_hidden_state  # [B, T, H]
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        out.append(torch.nn.functional.normalize(pooled, dim=-1))
    return torch.cat(out).numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", required=True, help="A text file, one sentence per line.")
    parser.add_argument("--order", choices=("input", "length"), default="input")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vectors", default=None, help="Also save the vectors (input order) as .npy here.")
    args = parser.parse_args()
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    with open(args.sentences, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    tokenizer = BertTokenizerFast.from_pretrained(MINILM)
    # transformers' default attention (scaled_dot_product_attention), its fastest on CPU.
    model = BertModel.from_pretrained(MINILM).eval()
    with torch.inference_mode():
        embed(model, tokenizer, texts[:256], args.batch_size, args.seq_len)  # warm-up
        loaded = time.perf_counter()
        order = np.arange(len(texts))
        if args.order == "length":
            order = np.argsort([-len(t) for t in texts], kind="stable")  # sentence-transformers sorts by characters
        vectors = embed(model, tokenizer, [texts[i] for i in order], args.batch_size, args.seq_len)
        done = time.perf_counter()
    restored = np.empty_like(vectors)
    restored[order] = vectors
    if args.vectors:
        np.save(args.vectors, restored)
    print(f"pytorch ({args.order} order): {len(texts) / (done - loaded):.1f} sentences/s", file=sys.stderr)
    print(json.dumps({
        "order": args.order, "sentences": len(texts), "batch_size": args.batch_size, "seq_len": args.seq_len,
        "threads": args.threads, "seconds": done - loaded, "sentences_per_second": len(texts) / (done - loaded),
        "start_up_seconds": loaded - started, "torch": torch.__version__, "transformers": transformers.__version__,
        "attention": model.config._attn_implementation,
    }))


if __name__ == "__main__":
    main()
