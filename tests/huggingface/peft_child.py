"""Loads a `kbert export --peft-adapter` folder with peft over its base, and the merged export
of the same model with transformers alone, in `.venv-torch` (PyTorch, transformers, peft; no
TensorFlow), and runs both on the same texts.

    python peft_child.py OUTPUT MERGED REQUEST.json OUT.npz

OUTPUT: the folder holding base/ and adapter/; MERGED: a `--formats huggingface` folder.
REQUEST: {"texts": [...], "max_length": N}, tokenized by OUTPUT/base's AutoTokenizer.
Prints one JSON line: the base's loading info, peft's config of the adapter (r, lora_alpha,
target_modules, task_type), the modules peft put LoRA on, those it loaded whole
(modules_to_save) and whether
AutoPeftModel (which finds the base by base_model_name_or_path) gives the same logits.
OUT.npz: the batch (input_ids, token_type_ids, attention_mask), `peft` (the adapter over the
base) and `merged` logits.
"""

import json
import os
import sys

import numpy as np
import peft
import torch
import transformers


def main(output, merged, request_path, out_path):
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    base_folder, adapter_folder = os.path.join(output, "base"), os.path.join(output, "adapter")
    tokenizer = transformers.AutoTokenizer.from_pretrained(base_folder)
    batch = tokenizer(
        request["texts"], padding=True, truncation=True, max_length=request["max_length"], return_tensors="pt"
    )
    base, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        base_folder, output_loading_info=True
    )
    model = peft.PeftModel.from_pretrained(base, adapter_folder).eval()
    config = model.peft_config["default"]
    lora_modules = sorted(
        name for name, module in model.named_modules() if isinstance(module, peft.tuners.lora.LoraLayer)
    )
    saved_modules = sorted(
        name for name, module in model.named_modules() if isinstance(module, peft.utils.ModulesToSaveWrapper)
    )
    auto = peft.AutoPeftModelForSequenceClassification.from_pretrained(adapter_folder).eval()
    plain = transformers.AutoModelForSequenceClassification.from_pretrained(merged).eval()
    with torch.no_grad():
        logits = {
            "peft": model(**batch).logits,
            "auto": auto(**batch).logits,
            "merged": plain(**batch).logits,
        }
    report = {
        "loading_info": {key: sorted(map(str, value)) for key, value in info.items()},
        "config": {
            "task_type": str(config.task_type),
            "r": config.r,
            "lora_alpha": config.lora_alpha,
            "target_modules": sorted(config.target_modules),
        },
        "lora_modules": lora_modules,
        "saved_modules": saved_modules,
        "auto_equals_peft": bool(torch.equal(logits["auto"], logits["peft"])),
    }
    arrays = {key: value.numpy() for key, value in batch.items()}
    arrays.update({"peft": logits["peft"].numpy(), "merged": logits["merged"].numpy()})
    np.savez(out_path, **arrays)
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
