"""Reference raw-text classification: PyTorch + transformers on the all-MiniLM-L6-v2 shape, for
the inference throughput bench (bench/perf/inference_throughput.py).

BertForSequenceClassification (2 labels; default attention: SDPA) and BertTokenizerFast from
the local data/minilm folder (no hub; the classification head is new, which changes nothing
of the speed), eval mode, `torch.inference_mode()`, --threads intra-op threads. Batches of
--batch-size texts, each padded to its longest text (truncation at --seq-len), labels out
(argmax); --order input keeps the file's order (a plain transformers loop), --order length
sorts by length first. Tokenization is timed with the model. Blank lines are skipped.

    .venv-torch/bin/python -m bench.reference.classify_pytorch \\
        --sentences data/bench/distill_mr/mr_sentences.txt
"""

from bench.reference.torch_harness import run, torch  # sets Hugging Face offline before transformers loads
from transformers import BertForSequenceClassification, BertTokenizerFast  # noqa: E402

from bench.common import MINILM  # noqa: E402


def classify(model, tokenizer, texts, batch_size, seq_len):
    labels = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(
            texts[start : start + batch_size],
            padding="longest",
            truncation=True,
            max_length=seq_len,
            return_tensors="pt",
        )
        labels.append(model(**batch).logits.argmax(-1))
    return torch.cat(labels).numpy()


def load():
    return BertForSequenceClassification.from_pretrained(
        MINILM, num_labels=2
    ).eval(), BertTokenizerFast.from_pretrained(MINILM)


if __name__ == "__main__":
    run(__doc__.splitlines()[0], load, classify, batch_size=32, keep_blank_lines=False)
