"""`kbert finetune --validation-split FRACTION`: a stratified, seeded validation part of the
training file, written as two JSONL files that the run folder keeps (`OUTPUT/split/`), so
`kbert evaluate` can score the same held-out rows again."""

import json
import os

from keras_bert_impl.atomic_write import write_text_atomically

SPLIT_FOLDER = "split"


def split_rows(texts, texts_b, labels, fraction, seed, settings, folder):
    """Writes FOLDER/train.jsonl and FOLDER/validation.jsonl (the columns named as in
    `settings`) and returns their paths, the layout settings to read them with, and the
    row counts. `labels`: one label string per row, or a list of them (multi-label)."""
    from keras_bert_impl.data import stratified_split

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
