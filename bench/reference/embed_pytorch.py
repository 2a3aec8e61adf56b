"""Reference sentence embedding: PyTorch + transformers on all-MiniLM-L6-v2, mean pooling and
L2 normalisation (the model's published recipe), for the embedding throughput bench.

BertModel (default attention: SDPA) and BertTokenizerFast from the local data/minilm folder (no hub), eval
mode, `torch.inference_mode()`, --threads intra-op threads. Batches of --batch-size texts, each
padded to its longest text, truncation at --seq-len; --order input keeps the file's order (what
a plain transformers loop does), --order length sorts by length first (what
sentence-transformers' encode() does). Tokenization is timed with the model.

Runs in the torch venv without TensorFlow; prints one JSON line for the calling bench:

    .venv-torch/bin/python -m bench.reference.embed_pytorch --sentences data/bench/reviews_10k.txt \\
        --order input
"""

import numpy as np

from bench.reference.torch_harness import run, torch  # sets Hugging Face offline before transformers loads
from transformers import BertModel, BertTokenizerFast  # noqa: E402

from bench.common import MINILM  # noqa: E402


def embed(model, tokenizer, texts, batch_size, seq_len):
    out = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(
            texts[start : start + batch_size],
            padding="longest",
            truncation=True,
            max_length=seq_len,
            return_tensors="pt",
        )
        hidden = model(**batch).last_hidden_state  # [B, T, H]
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        out.append(torch.nn.functional.normalize(pooled, dim=-1))
    return torch.cat(out).numpy()


def load():
    # transformers' default attention (scaled_dot_product_attention), its fastest on CPU.
    return BertModel.from_pretrained(MINILM).eval(), BertTokenizerFast.from_pretrained(MINILM)


def save_vectors(args, vectors, order):
    if args.vectors:
        restored = np.empty_like(vectors)
        restored[order] = vectors
        np.save(args.vectors, restored)


if __name__ == "__main__":
    run(
        __doc__.splitlines()[0],
        load,
        embed,
        batch_size=64,
        keep_blank_lines=True,
        add_arguments=lambda p: p.add_argument(
            "--vectors", default=None, help="Also save the vectors (input order) as .npy here."
        ),
        finish=save_vectors,
    )
