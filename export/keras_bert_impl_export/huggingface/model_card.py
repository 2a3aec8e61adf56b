"""The README.md (model card) of a transformers folder: what the model is, where it came
from and how it was trained, read from the run folder's own records."""

import json
import os

_TASK_PIPELINES = {
    "BertModel": "feature-extraction",
    "BertForPreTraining": "fill-mask",
    "BertForSequenceClassification": "text-classification",
    "BertForTokenClassification": "token-classification",
    "BertForQuestionAnswering": "question-answering",
}


# Where transformers' tokenizer (Hugging Face `tokenizers`) gives other ids than the Keras
# model's BertPreprocessor, which follows Google's tokenization.py: the deliberate differences
# of tests/fixtures/tokenization_hard_cases.json (`expect: google`), one line per kind.
TOKENIZER_DIFFERENCES = (
    "Pairs longer than the length, with an odd budget and both segments over half of it: we cut as Google's "
    "`_truncate_seq_pair` (A keeps one piece more than B); `tokenizers`' longest_first gives it to the "
    "longer one.",
    "Literal `[CLS]`, `[SEP]`, `[MASK]`, `[UNK]`, `[PAD]` in the text are plain text for us; the fast "
    "tokenizer matches them as special tokens.",
    "Private-use characters (category Co) stay and make their word [UNK] for us; the fast tokenizer deletes "
    "them.",
    "U+2B820..U+2B91F are CJK ideographs for us (split off, as Google's and tensorflow-text's tables say); "
    "Hugging Face's table starts that block at U+2B920.",
    "Characters whose Unicode category changed after Unicode 9 (e.g. U+07FD, U+0890, U+166D, U+1734, "
    "U+2E55/2E56): we use Python's Unicode 14.0 tables, the fast tokenizer older ones.",
)


def _read_json(path):
    if not path or not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _flat_numbers(metrics, prefix=""):
    """(name, value) of every number in metrics.json's nested dicts (lists left out: the history)."""
    rows = []
    for key, value in metrics.items():
        if isinstance(value, dict):
            rows += _flat_numbers(value, f"{prefix}{key}.")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append((prefix + key, value))
    return rows


def model_card(described, source, run_folder=None):
    """README.md text.

    Args:
        described: the `TransformersModel` written.
        source: the .keras file it came from.
        run_folder: the kbert run folder (run.json, metrics.json), or None for a bare .keras.
    """
    record = _read_json(run_folder and os.path.join(run_folder, "run.json"))
    metrics = _read_json(run_folder and os.path.join(run_folder, "metrics.json"))
    settings = record.get("settings", {})
    config = described.config
    lines = [
        "---",
        "library_name: transformers",
        f"pipeline_tag: {_TASK_PIPELINES[described.architecture]}",
        "tags: [bert, keras_bert_impl]",
        "---",
        "",
        f"# {described.architecture}",
        "",
        "Exported by keras_bert_impl (`kbert export --formats huggingface`) from "
        f"`{os.path.basename(source)}`.",
        f"Task: {described.task}.",
        "",
        f"- Encoder: {config['num_hidden_layers']} layers, hidden size {config['hidden_size']}, "
        f"{config['num_attention_heads']} heads, intermediate size {config['intermediate_size']}, "
        f"hidden_act {config['hidden_act']}, up to {config['max_position_embeddings']} positions.",
    ]
    inputs = record.get("inputs", {})
    # The starting model: finetune's --init, distill's --teacher (sha256 beside it in run.json).
    base = [inputs[key]["path"] for key in ("init", "teacher", "student_init") if key in inputs]
    if base:
        lines.append(f"- Started from: {', '.join(f'`{p}`' for p in base)}.")
    if described.label_names:
        lines.append(f"- Labels (id order): {', '.join(f'`{n}`' for n in described.label_names)}.")
    if record.get("command"):
        lines.append(f"- Trained by `kbert {record['command']}`.")
    lines += [
        "",
        "```python",
        "from transformers import AutoTokenizer, " + described.architecture,
        "",
        'tokenizer = AutoTokenizer.from_pretrained("PATH")',
        f'model = {described.architecture}.from_pretrained("PATH")',
        "```",
    ]
    if described.notes:
        lines += ["", "## Differences from the Keras model", ""] + [f"- {note}" for note in described.notes]
    lines += [
        "",
        "## Where AutoTokenizer differs from the Keras model's tokenizer",
        "",
        "The same ids on ordinary text (checked on 4,000 movie-review sentences and 85 hard cases), except:",
        "",
    ]
    lines += [f"- {difference}" for difference in TOKENIZER_DIFFERENCES]
    if settings:
        lines += ["", "## Training settings", "", "| setting | value |", "|---|---|"]
        lines += [f"| {key} | `{json.dumps(value)}` |" for key, value in sorted(settings.items())]
    # A fine-tuning run's validation scores (metrics.json's other entries are timings).
    numbers = _flat_numbers(metrics["validation"] if isinstance(metrics.get("validation"), dict) else metrics)
    if numbers:
        lines += ["", "## Metrics (metrics.json)", "", "| metric | value |", "|---|---|"]
        lines += [
            f"| {name} | {value:.4f} |" if isinstance(value, float) else f"| {name} | {value} |"
            for name, value in numbers
        ]
    return "\n".join(lines) + "\n"
