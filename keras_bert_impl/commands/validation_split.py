"""`kbert finetune --validation-split FRACTION`: a stratified, seeded validation part of the
training file, written as two JSONL files that the run folder keeps (`OUTPUT/split/`), so
`kbert evaluate` can score the same held-out rows again."""

import collections
import json
import os

import numpy as np

from keras_bert_impl.atomic_write import write_text_atomically

SPLIT_FOLDER = "split"


def stratified_split(keys, fraction, seed):
    """(train indices, validation indices), each in file order: `fraction` of each key's
    rows (rounded; at least one, and one left for training, when a key has two or more
    rows) drawn by `numpy.random.default_rng(seed)`, keys taken in sorted order."""
    rng = np.random.default_rng(seed)
    rows = collections.defaultdict(list)
    for index, key in enumerate(keys):
        rows[key].append(index)
    validation = []
    for key in sorted(rows):
        indices = rows[key]
        count = int(round(fraction * len(indices)))
        if len(indices) >= 2:
            count = min(max(count, 1), len(indices) - 1)
        else:
            count = 0
        validation.extend(rng.permutation(indices)[:count].tolist())
    held = set(validation)
    return [i for i in range(len(keys)) if i not in held], sorted(validation)


def split_rows(texts, texts_b, labels, fraction, seed, settings, folder):
    """Writes FOLDER/train.jsonl and FOLDER/validation.jsonl (the columns named as in
    `settings`) and returns their paths, the layout settings to read them with, and the
    row counts. `labels`: one label string per row, or a list of them (multi-label)."""
    keys = [tuple(sorted(label)) if isinstance(label, list) else label for label in labels]
    train, validation = stratified_split(keys, fraction, seed)
    text_column = settings["text_column"]
    label_column = settings["label_column"] or (
        "labels" if labels and isinstance(labels[0], list) else "label"
    )
    paths = {}
    for name, indices in (("train", train), ("validation", validation)):
        lines = []
        for i in indices:
            row = {text_column: texts[i], label_column: labels[i]}
            if texts_b[i] is not None:
                row[settings["text_b_column"]] = texts_b[i]
            lines.append(json.dumps(row, ensure_ascii=False))
        paths[name] = os.path.join(folder, f"{name}.jsonl")
        write_text_atomically("\n".join(lines) + "\n", paths[name])
    layout = {**settings, "format": "jsonl", "header": True, "columns": None, "label_column": label_column}
    return paths["train"], paths["validation"], layout, (len(train), len(validation))
