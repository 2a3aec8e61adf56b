"""Writes small random BERT checkpoints with transformers' own classes, each with what that
class computes, for tests/checkpoints/test_transformers_checkpoints.py. Runs in `.venv-torch`
(PyTorch, transformers, no TensorFlow).

    python transformers_checkpoints_child.py OUT_DIR

OUT_DIR/NAME/: config.json, model.safetensors (save_pretrained), the cased tokenizer as
transformers saves it (tokenizer.json, tokenizer_config.json; vocab.txt too for some), and
reference.npz: the input ids, segment ids and mask, and every tensor the model returns
(last_hidden_state, pooler_output, prediction_logits, seq_relationship_logits, logits).
"""

import os
import sys

import numpy as np
import torch
import transformers

# Cased: "The" and "Dog" beside "cat".
VOCABULARY = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    + [f"w{i}" for i in range(40)]
    + ["The", "Dog", "cat", "##s"]
)
# initializer_range 0.5: activations large enough that the tanh and erf GELUs, or a wrong
# LayerNorm epsilon, differ by far more than float32 rounding.
BASE = dict(
    vocab_size=len(VOCABULARY),
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=24,
    max_position_embeddings=40,
    type_vocab_size=3,
    initializer_range=0.5,
)
CHECKPOINTS = {
    # name: (class, config changes)
    "eps_relu": ("BertModel", dict(layer_norm_eps=1e-3, hidden_act="relu")),
    "gelu_new": ("BertModel", dict(hidden_act="gelu_new", layer_norm_eps=1e-6)),
    "pretraining": ("BertForPreTraining", {}),
    "masked_lm": ("BertForMaskedLM", {}),
    "next_sentence": ("BertForNextSentencePrediction", {}),
}

# The others keep only what transformers' tokenizer saved.
WITH_VOCAB_TXT = ("eps_relu", "gelu_new")


def inputs():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, len(VOCABULARY), size=(2, 9))
    ids[:, 0], ids[:, -1] = 2, 3
    segments = np.zeros_like(ids)
    segments[:, 5:] = 2  # the third segment type
    mask = np.ones_like(ids)
    mask[1, -3:] = 0
    return ids * mask, segments * mask, mask


def main(out_dir):
    ids, segments, mask = inputs()
    for name, (cls, changes) in CHECKPOINTS.items():
        torch.manual_seed(0)
        model = getattr(transformers, cls)(transformers.BertConfig(**BASE, **changes)).eval()
        folder = os.path.join(out_dir, name)
        model.save_pretrained(folder)
        vocab_path = os.path.join(folder, "vocab.txt")
        with open(vocab_path, "w", encoding="utf-8") as f:
            f.write("\n".join(VOCABULARY) + "\n")
        # transformers 5 saves the tokenizer as tokenizer.json and tokenizer_config.json, no vocab.txt.
        transformers.BertTokenizer(vocab_path, do_lower_case=False).save_pretrained(folder)
        if name not in WITH_VOCAB_TXT:
            os.remove(vocab_path)
        with torch.no_grad():
            outputs = model(
                input_ids=torch.tensor(ids),
                token_type_ids=torch.tensor(segments),
                attention_mask=torch.tensor(mask),
                output_hidden_states=True,
            )
        arrays = {
            "ids": ids,
            "segments": segments,
            "mask": mask,
            "last_hidden_state": outputs.hidden_states[-1].numpy(),
        }
        arrays.update(
            {key: value.numpy() for key, value in outputs.items() if isinstance(value, torch.Tensor)}
        )
        np.savez(os.path.join(folder, "reference.npz"), **arrays)


if __name__ == "__main__":
    main(*sys.argv[1:])
