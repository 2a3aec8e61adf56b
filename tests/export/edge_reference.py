"""The Python pipeline's answers that the edge demos (android_demo/'s Java, web_demo/'s page)
are held to: BertPreprocessor's ids and the Keras model's probabilities.

Shared by tests/export/test_android_logic.py and tests/export/test_web_demo.py; every value
is computed here from the real model and tokenizer, none is typed in."""

import json
import os

import keras
import numpy as np

import keras_bert_impl as kb
from keras_bert_impl.tokenization import BertPreprocessor

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARD_CASES = os.path.join(REPO, "tests", "fixtures", "tokenization_hard_cases.json")
CHAR_TABLE = os.path.join(REPO, "android_demo", "app", "src", "main", "assets", "bert_unicode.txt")

# The bad input of the issue, as the app and the page meet it (each also gets the pipeline's ids).
# "ሰላም ዓለም" is Amharic (Ethiopic script), which the MiniLM vocabulary has no piece of.
BAD_INPUT = {
    "empty": "",
    "whitespace": "  \t\n ",
    "only_ignored_characters": "\u200b\ufeff\u00ad",
    "emoji_only": "\U0001f600\U0001f602\U0001f389\U0001f44d\U0001f3fd",
    "script_not_in_vocabulary": "\u1230\u120b\u121d \u12d3\u1208\u121d",
}


def long_text(sentences, chars=10_000):
    """A 10,000-character text made of real sentences (what a paste of a review looks like)."""
    text = ""
    while len(text) < chars:
        text += " ".join(sentences) + " "
    return text[:chars]


def preprocess(vocabulary, texts, sequence_length, texts_b=None):
    """BertPreprocessor's packed inputs as int lists (pairs when texts_b is given)."""
    pre = BertPreprocessor(vocabulary, sequence_length=sequence_length)
    x = pre((list(texts), list(texts_b)) if texts_b is not None else list(texts))
    return {k: x[k].numpy().astype(int).tolist() for k in ("token_ids", "segment_ids", "padding_mask")}


def hard_cases(vocabulary):
    """Every case of tests/fixtures/tokenization_hard_cases.json with BertPreprocessor's ids."""
    with open(HARD_CASES, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    out = []
    for case in cases:
        length = case.get("sequence_length", 32)
        x = preprocess(vocabulary, [case["text"]], length, [case["text_b"]] if "text_b" in case else None)
        row = {"name": case["name"], "text": case["text"], "sequence_length": length}
        if "text_b" in case:
            row["text_b"] = case["text_b"]
        row.update({k: v[0] for k, v in x.items()})
        out.append(row)
    return out


def keras_sentence_embeddings(backbone_keras, texts, sequence_length):
    """Mean-pooled, L2-normalised embeddings of a `kbert convert` backbone (what `kbert export`
    exports as a sentence embedder), on BertPreprocessor's ids."""
    embedder = kb.BertEmbedder(keras.saving.load_model(backbone_keras), pooling="mean")
    x = BertPreprocessor.from_model(embedder.backbone, sequence_length=sequence_length)(list(texts))
    out = embedder.predict(
        {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}, batch_size=64, verbose=0
    )
    return np.asarray(out["embeddings"], np.float64)


class KerasReference:
    """The fine-tuned Keras classifier of a `kbert finetune` run, with its own preprocessor."""

    def __init__(self, run_dir, sequence_length):
        self.model = keras.saving.load_model(os.path.join(run_dir, "model.keras"))
        self.preprocessor = BertPreprocessor.from_model(self.model, sequence_length=sequence_length)

    def predict(self, texts):
        x = self.preprocessor(list(texts))
        logits = self.model.predict(
            {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}, batch_size=64, verbose=0
        )["logits"]
        logits = np.asarray(logits, np.float32)
        # Softmax in float64: the reference for the apps' probabilities.
        shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
        probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        return {
            "token_ids": x["token_ids"].numpy().astype(int),
            "logits": logits,
            "probabilities": probabilities,
        }


def codepoint_sample():
    """Every codepoint of the Basic Multilingual Plane and every 7th above it (surrogates
    excluded): 63,488 + 148,736 codepoints, each of Unicode's categories many times over."""
    return [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and (cp < 0x10000 or cp % 7 == 0)]


def codepoint_ids(vocabulary, codepoints):
    """BertPreprocessor's word pieces of "ab{c}cd {c}" for each codepoint c: inside a word and
    alone, which shows whether c is deleted, a space, folded, split off or kept in the word."""
    pre = BertPreprocessor(vocabulary, sequence_length=None)
    texts = [f"ab{chr(cp)}cd {chr(cp)}" for cp in codepoints]
    ids = []
    for first in range(0, len(texts), 65536):
        ids.extend(pre.tokenize(texts[first : first + 65536]).to_list())
    return ids


def write_golden(path, export_dir, run_dir, texts, held_out, sequence_length, logits_sentences=20):
    """The pipeline's answers as one JSON file for the JVM and Node tests: BertPreprocessor's ids
    for every hard case, for `texts`, for the bad input and for "ab{c}cd {c}" over
    codepoint_sample(); the Keras model's logits and
    probabilities for the first `logits_sentences` of `held_out`. ASCII-escaped, so the readers'
    \\u and surrogate-pair handling is exercised on every non-ASCII text."""
    vocabulary = os.path.join(export_dir, "vocab.txt")
    with open(os.path.join(export_dir, "export.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    mr_ids = preprocess(vocabulary, texts, sequence_length)["token_ids"]
    codepoints = codepoint_sample()
    bad = dict(BAD_INPUT, **{"10000_characters": long_text(texts[:40])})
    bad_ids = preprocess(vocabulary, list(bad.values()), sequence_length)["token_ids"]
    few = held_out[:logits_sentences]
    reference = KerasReference(run_dir, sequence_length).predict(few)
    data = {
        "vocabulary": vocabulary,
        "char_table": CHAR_TABLE,
        "lowercase": manifest["lowercase"],
        "labels": manifest["label_names"],
        "hard_cases": hard_cases(vocabulary),
        "mr": {"sequence_length": sequence_length, "texts": list(texts), "token_ids": mr_ids},
        "codepoints": {"codepoints": codepoints, "token_ids": codepoint_ids(vocabulary, codepoints)},
        "bad_input": [
            {"name": name, "text": text, "sequence_length": sequence_length, "token_ids": ids}
            for (name, text), ids in zip(bad.items(), bad_ids)
        ],
        "logits": [
            {
                "text": text,
                "logits": [float(v) for v in logits],
                "probabilities": [float(p) for p in probabilities],
                "label": manifest["label_names"][int(np.argmax(logits))],
            }
            for text, logits, probabilities in zip(few, reference["logits"], reference["probabilities"])
        ],
    }
    with open(path, "w", encoding="ascii") as f:
        json.dump(data, f, ensure_ascii=True)
    return str(path)
