"""What the transformers tests share: a request to transformers_child.py in `.venv-torch`, and
the Keras model's outputs on the very ids transformers was given."""

import json
import os

import keras
import numpy as np

import keras_bert_impl as kb
from tests.conftest import REPO
from tests.side_venv import run_in_side_venv

CHILD = os.path.join(REPO, "tests", "huggingface", "transformers_child.py")
# transformers' BERT keeps position_ids as a buffer that it does not save: the key our export
# (and the original MiniLM file) carries is read and dropped.
BUFFERS = {"bert.embeddings.position_ids", "embeddings.position_ids"}


def transformers_outputs(folder, request, tmp_path):
    """(report, arrays) of transformers_child.py on `folder` (its docstring says what they hold)."""
    return transformers_outputs_of_many([(folder, request)], tmp_path)[0]


def transformers_outputs_of_many(jobs, tmp_path):
    """[(report, arrays)] of transformers_child.py on each (folder, request) of `jobs`, all in one
    child process."""
    args = []
    for index, (folder, request) in enumerate(jobs):
        request_path, out = tmp_path / f"request_{index}.json", tmp_path / f"out_{index}.npz"
        request_path.write_text(json.dumps(request), encoding="utf-8")
        args += [folder, str(request_path), str(out)]
    printed = run_in_side_venv(".venv-torch", CHILD, *args).splitlines()
    lines = [line for line in printed if line.startswith('{"tokenizer_class"')]  # the jobs' reports
    assert len(lines) == len(jobs), printed[-20:]
    results = []
    for index, line in enumerate(lines):
        out = tmp_path / f"out_{index}.npz"
        if not out.exists():
            results.append((json.loads(line), {}))
            continue
        with np.load(out) as arrays:
            results.append((json.loads(line), dict(arrays)))
    return results


def check_loading_info(report):
    """Every weight of the folder was used, none missing, none reshaped (the buffer aside)."""
    info = report["loading_info"]
    assert not info["missing_keys"] and not info["mismatched_keys"], info
    assert set(info["unexpected_keys"]) <= BUFFERS, info


def keras_outputs(model, arrays):
    """The model's outputs (numpy) on the input_ids / token_type_ids / attention_mask transformers ran."""
    x = {
        "token_ids": arrays["input_ids"],
        "segment_ids": arrays["token_type_ids"],
        "padding_mask": arrays["attention_mask"],
    }
    if isinstance(model, kb.BertPretrainer):  # masked-LM logits at every position, as transformers gives them
        x["mask_positions"] = np.tile(np.arange(x["token_ids"].shape[1]), (len(x["token_ids"]), 1))
    return {
        key: keras.ops.convert_to_numpy(value)
        for key, value in model({k: v.astype("int32") for k, v in x.items()}).items()
    }
