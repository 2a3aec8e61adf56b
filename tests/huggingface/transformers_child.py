"""Loads an exported folder with transformers (AutoTokenizer + the class in its config.json)
in `.venv-torch` (PyTorch, transformers, no TensorFlow) and reports what it gives.

    python transformers_child.py FOLDER REQUEST.json OUT.npz [FOLDER REQUEST.json OUT.npz ...]

Several jobs (triples) run in this one process, one after the other: the interpreter's start and
the PyTorch and transformers imports cost more than a forward pass.

REQUEST: {"tokenize": [{"text", "text_b" (optional), "max_length"}, ...] (optional),
          "forward": {"texts", "texts_b" (or null), "max_length"} or {"ids": IDS.npz} (optional)}.
IDS.npz: input_ids, token_type_ids and attention_mask of a batch made elsewhere (SQuAD windows).
Prints one JSON line per job, in order: the tokenizer's class, the model's loading info (missing
and unexpected keys), and each "tokenize" item's input_ids and token_type_ids. OUT.npz: the
forward batch's input_ids, attention_mask, token_type_ids and every tensor the model returns.
"""

import json
import sys

import numpy as np
import torch
import transformers


def main(folder, request_path, out_path):
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    report = {"tokenizer_class": type(tokenizer).__name__, "tokenized": []}
    for item in request.get("tokenize", []):
        # A batch of one: called with text_pair="" transformers drops the empty second segment,
        # a batch of (a, b) keeps it (as BertPreprocessor does).
        row = (item["text"], item["text_b"]) if "text_b" in item else item["text"]
        encoded = tokenizer([row], truncation=True, max_length=item["max_length"])
        report["tokenized"].append(
            {"input_ids": encoded["input_ids"][0], "token_type_ids": encoded["token_type_ids"][0]}
        )
    forward = request.get("forward")
    if forward:
        with open(f"{folder}/config.json", encoding="utf-8") as f:
            architecture = json.load(f)["architectures"][0]
        model, info = getattr(transformers, architecture).from_pretrained(folder, output_loading_info=True)
        model.eval()
        report["loading_info"] = {key: sorted(map(str, value)) for key, value in info.items()}
        if "ids" in forward:
            with np.load(forward["ids"]) as ids:
                batch = {
                    key: torch.from_numpy(ids[key].astype(np.int64))
                    for key in ("input_ids", "token_type_ids", "attention_mask")
                }
        else:
            texts = (forward["texts"], forward["texts_b"]) if forward.get("texts_b") else (forward["texts"],)
            batch = tokenizer(
                *texts, padding=True, truncation=True, max_length=forward["max_length"], return_tensors="pt"
            )
        with torch.no_grad():
            outputs = model(**batch)
        arrays = {key: value.numpy() for key, value in batch.items()}
        arrays.update(
            {key: value.numpy() for key, value in outputs.items() if isinstance(value, torch.Tensor)}
        )
        np.savez(out_path, **arrays)
    print(json.dumps(report))


if __name__ == "__main__":
    jobs = sys.argv[1:]
    if not jobs or len(jobs) % 3:
        sys.exit(f"usage: {sys.argv[0]} FOLDER REQUEST.json OUT.npz [...]: got {len(jobs)} arguments")
    for first in range(0, len(jobs), 3):
        main(*jobs[first : first + 3])
