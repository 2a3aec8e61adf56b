"""Serving: a SavedModel that takes raw strings gives, in a fresh process with
only tensorflow and tensorflow_text imported, the ids BertPreprocessor gives here.

tensorflow_text must be imported before loading: it registers the tokenizer
kernels the graph uses (FastBertNormalizer, FastWordpieceTokenizeWithOffsets).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.tokenization import BertPreprocessor
from tests.tokenization import references

TEXTS_A = [
    "The quick brown fox jumps over the lazy dog.",
    "Éclair CAFÉ naïve … ﬁnance ß",
    "中文字符 日本語 한국어 😀👍🏽",
    "nul\x00byte bell\x07 zero\u200bwidth \ufeffbom tab\tnew\nline",
    "я" * 60 + " " + "a" * 101,
    "",
    "   ",
    "[SEP] literal \ue000 private use",
    "the movie is long " * 20,
]
TEXTS_B = ["short", "", "a second segment here", "x " * 40, "b", "only b", "", "c", "pair " * 30]

LOADER = r"""
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the tokenizer ops
path, texts_file = sys.argv[1], sys.argv[2]
with open(texts_file, encoding="utf-8") as f:
    texts = json.load(f)
served = tf.saved_model.load(path)
single = served.single(tf.constant(texts["a"]))
pair = served.pair(tf.constant(texts["a"]), tf.constant(texts["b"]))
outputs = (("single", single), ("pair", pair))
result = {name: {k: v.numpy().tolist() for k, v in out.items()} for name, out in outputs}
try:
    served.single(tf.constant([b"caf\xe9"]))
    result["invalid_utf8"] = "no error"
except tf.errors.InvalidArgumentError as e:
    result["invalid_utf8"] = "not valid UTF-8" in e.message and "caf\ufffd" in e.message
ours = ("keras_bert_impl", "tokenizers", "bert")
result["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ours)
print(json.dumps(result))
"""


class Serving(tf.Module):
    def __init__(self, preprocessor):
        super().__init__()
        self.preprocessor = preprocessor

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def single(self, text):
        return self.preprocessor(text)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.string)])
    def pair(self, text_a, text_b):
        return self.preprocessor((text_a, text_b))


@pytest.mark.slow  # about 20 s or more: a fresh process imports TensorFlow and loads the SavedModel
def test_saved_model_gives_the_same_ids_in_a_fresh_process(tmp_path):
    pre = BertPreprocessor(references.VOCAB, sequence_length=48)
    serving = Serving(pre)
    path = str(tmp_path / "preprocessor")
    tf.saved_model.save(serving, path, signatures={"serving_default": serving.single})
    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps({"a": TEXTS_A, "b": TEXTS_B}), encoding="utf-8")

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, "-c", LOADER, path, str(texts_file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout.strip().splitlines()[-1])

    assert served["modules"] == []  # the loader needed nothing of ours
    assert served["invalid_utf8"] is True
    in_process = {
        "single": pre(tf.constant(TEXTS_A)),
        "pair": pre((tf.constant(TEXTS_A), tf.constant(TEXTS_B))),
    }
    for name, out in in_process.items():
        for key in ("token_ids", "segment_ids", "padding_mask"):
            np.testing.assert_array_equal(
                np.array(served[name][key]), out[key].numpy(), err_msg=f"{name} {key}"
            )
    # And those ids are the reference's (the [SEP] / private-use row is a deliberate difference).
    hf = references.hf_tokenizer(48)
    expected = [e.ids for e in hf.encode_batch(TEXTS_A)]
    assert [row for i, row in enumerate(served["single"]["token_ids"]) if i != 7] == expected[:7] + expected[
        8:
    ]
