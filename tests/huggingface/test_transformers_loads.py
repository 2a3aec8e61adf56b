"""The exported folders in transformers itself: `.venv-torch` (PyTorch 2.13.0 CPU, transformers
5.23.0, no TensorFlow) loads each head with AutoTokenizer and the class config.json names, and
gives our ids and the Keras model's outputs. The heads sit on the real MiniLM encoder (random,
seeded heads): every logit depends on all of its 22M weights."""

import json
import os

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.tokenization import BertPreprocessor
from bench.corpora.mr_split import load_mr
from keras_bert_impl_export.huggingface import export_huggingface
from tests.conftest import DATA, REPO
from tests.export.edge_reference import preprocess
from tests.huggingface.transformers_side import (
    check_loading_info,
    keras_outputs,
    transformers_outputs,
    transformers_outputs_of_many,
)
from tests.side_venv import run_in_side_venv
from tests.test_readme import python_block

# Subprocesses in .venv-torch, which make test-slow builds (make test needs no side venv).
pytestmark = pytest.mark.slow

SENTENCES = 200  # real MR sentences per forward check
LENGTH = 128


@pytest.fixture(scope="module")
def mr_texts():
    texts, _ = load_mr(os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv"))
    return texts


def _our_ids(vocabulary, requests):
    """BertPreprocessor's {input_ids, token_type_ids} of each request (padding cut off), one
    preprocessor per (length, pair) group."""
    groups = {}
    for index, request in enumerate(requests):
        groups.setdefault((request["max_length"], "text_b" in request), []).append(index)
    ours = [None] * len(requests)
    for (length, pair), indices in groups.items():
        texts = [requests[i]["text"] for i in indices]
        x = preprocess(vocabulary, texts, length, [requests[i]["text_b"] for i in indices] if pair else None)
        for row, i in enumerate(indices):
            mask = x["padding_mask"][row]
            ours[i] = {
                key: [v for v, m in zip(x[name][row], mask) if m]
                for key, name in (("input_ids", "token_ids"), ("token_type_ids", "segment_ids"))
            }
    return ours


KINDS = ["classifier", "tagger", "spans", "pretrainer"]


def _head(kind, backbone):
    keras.utils.set_random_seed(7)
    if kind == "classifier":
        return kb.BertClassifier(backbone, 2, label_names=["negative", "positive"])
    if kind == "tagger":
        return kb.BertTokenClassifier(backbone, 5, label_names=["DT", "NN", "JJ", "VB", "O"])
    if kind == "pretrainer":
        return kb.BertPretrainer(backbone)
    return kb.BertSpanLabeler(backbone)


def _forward_request(kind, mr_texts):
    # The pretrainer's 30,522 logits per token: 16 sentences (200 would be 1.7 GB of them).
    texts = mr_texts[: 16 if kind == "pretrainer" else SENTENCES]
    # Question answering: a question and a real sentence as its context (segment 1).
    texts_b = texts if kind == "spans" else None
    texts = ["what does the critic think of the film?"] * SENTENCES if kind == "spans" else texts
    return {"forward": {"texts": texts, "texts_b": texts_b, "max_length": LENGTH}}


@pytest.fixture(scope="module")
def heads_in_transformers(minilm_keras, mr_texts, tmp_path_factory):
    """kind -> (model, export_huggingface's description, the child's report, its arrays): each
    head on one loaded MiniLM encoder, exported, and run by transformers, the four in one child
    process (its start and imports cost more than the forward passes)."""
    folder = tmp_path_factory.mktemp("heads")
    backbone = keras.saving.load_model(minilm_keras)
    models = {kind: _head(kind, backbone) for kind in KINDS}
    described = {kind: export_huggingface(models[kind], str(folder / kind)) for kind in KINDS}
    results = transformers_outputs_of_many(
        [(str(folder / kind), _forward_request(kind, mr_texts)) for kind in KINDS], folder
    )
    return {
        kind: (models[kind], described[kind], *result) for kind, result in zip(KINDS, results, strict=True)
    }


@pytest.mark.parametrize("kind", KINDS)
def test_transformers_gives_the_keras_outputs(kind, heads_in_transformers):
    model, described, report, arrays = heads_in_transformers[kind]
    check_loading_info(report)
    ours = keras_outputs(model, arrays)
    real = arrays["attention_mask"] == 1  # [N, T]
    assert (~real).any()  # padded rows are in the batch
    if kind == "classifier":
        assert described.architecture == "BertForSequenceClassification"
        np.testing.assert_allclose(arrays["logits"], ours["logits"], atol=1e-4, rtol=0)
        assert (arrays["logits"].argmax(-1) == ours["logits"].argmax(-1)).all()
    elif kind == "tagger":
        np.testing.assert_allclose(arrays["logits"][real], ours["logits"][real], atol=1e-4, rtol=0)
        assert (arrays["logits"][real].argmax(-1) == ours["logits"][real].argmax(-1)).all()
    elif kind == "pretrainer":
        # Tied to the word embeddings on both sides; 30,522 logits per token sum more terms.
        np.testing.assert_allclose(
            arrays["prediction_logits"][real], ours["mlm_logits"][real], atol=1e-4, rtol=0
        )
        np.testing.assert_allclose(arrays["seq_relationship_logits"], ours["nsp_logits"], atol=1e-4, rtol=0)
    else:
        assert (arrays["token_type_ids"][real] == 1).any()
        for key in ("start_logits", "end_logits"):
            np.testing.assert_allclose(arrays[key][real], ours[key][real], atol=1e-4, rtol=0, err_msg=key)


def test_autotokenizer_gives_our_ids(minilm_keras, mr_texts, tmp_path):
    """AutoTokenizer from the exported folder (tokenizer.json) against BertPreprocessor: the same
    ids on every `expect: hf` hard case (tests/fixtures/tokenization_hard_cases.json, pairs
    included) and all 4,000 MR sentences; other ids on the 10 `expect: google` ones."""
    backbone = keras.saving.load_model(minilm_keras)
    folder = str(tmp_path / "minilm")
    export_huggingface(backbone, folder)
    with open(os.path.join(REPO, "tests", "fixtures", "tokenization_hard_cases.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    assert [case["expect"] for case in cases].count("hf") == 85 and len(cases) == 95
    requests = [
        {
            "text": c["text"],
            "max_length": c.get("sequence_length", 32),
            **({"text_b": c["text_b"]} if "text_b" in c else {}),
        }
        for c in cases
    ]
    requests += [{"text": text, "max_length": LENGTH} for text in mr_texts]
    ours = _our_ids(backbone.vocabulary, requests)
    report, _ = transformers_outputs(folder, {"tokenize": requests}, tmp_path)
    assert (
        report["tokenizer_class"] == "BertTokenizer"
    )  # transformers 5's one BERT tokenizer, from tokenizer.json
    assert len(ours) == len(report["tokenized"]) == 95 + 4000
    expected = [case["expect"] for case in cases] + ["hf"] * len(mr_texts)
    differ = [
        (request, theirs)
        for request, mine, theirs, expect in zip(requests, ours, report["tokenized"], expected)
        if (mine == theirs) != (expect == "hf")
    ]
    # The hf cases and MR agree; the 10 deliberate differences (listed in the model card) still differ.
    assert not differ, differ[:10]


def test_the_docs_snippet_loads_an_export(minilm, tmp_path):
    """docs/export.md's transformers snippet, run as written on an export at the path it names."""
    backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=minilm.vocabulary_size)
    backbone.set_vocabulary(minilm.vocabulary, lowercase=True)
    classifier = kb.BertClassifier(backbone, 2, label_names=["negative", "positive"])
    export_huggingface(classifier, str(tmp_path / "exports" / "mr-transformers"))
    snippet = tmp_path / "snippet.py"
    snippet.write_text(python_block("docs/export.md", "## Hugging Face transformers"), encoding="utf-8")
    printed = run_in_side_venv(".venv-torch", str(snippet), cwd=str(tmp_path)).strip().splitlines()[-1]
    x = BertPreprocessor.from_model(classifier, sequence_length=16)(
        ["a gripping , funny film", "dull and slow"]
    )
    top = keras.ops.convert_to_numpy(classifier(x)["logits"]).argmax(-1)
    assert printed == str([classifier.label_names[i] for i in top])
