"""Checkpoints written by transformers' own classes (in `.venv-torch`, by
transformers_checkpoints_child.py) with configs MiniLM does not have: a LayerNorm epsilon of
1e-3, ReLU and tanh-GELU activations, three segment types, 40 positions, a cased vocabulary
(in vocab.txt, or only in the tokenizer.json transformers 5 saves), and the heads of BertForPreTraining,
BertForMaskedLM and BertForNextSentencePrediction. Each
import must compute what transformers computed."""

import os

import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.checkpoints import convert_checkpoint
from keras_bert_impl.checkpoints.weight_map import MLM_HEAD_NAMES, NSP_HEAD_NAMES, POOLER_NAMES
from tests.side_venv import run_in_side_venv

# A subprocess in .venv-torch, which make test-slow builds (make test needs no side venv).
pytestmark = pytest.mark.slow

CHILD = os.path.join(os.path.dirname(__file__), "transformers_checkpoints_child.py")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("transformers_checkpoints")
    run_in_side_venv(".venv-torch", CHILD, str(out))
    return out


def _imported(folder):
    model, report = convert_checkpoint(str(folder), format="huggingface")
    ref = np.load(folder / "reference.npz")
    x = {"token_ids": ref["ids"], "segment_ids": ref["segments"], "padding_mask": ref["mask"]}
    backbone = getattr(model, "backbone", model)
    assert backbone.lowercase is False and backbone.num_segments == 3 and backbone.max_sequence_length == 40
    out = {k: np.asarray(v) for k, v in backbone(x).items()}
    if isinstance(model, kb.BertPretrainer):
        positions = np.tile(np.arange(ref["ids"].shape[1], dtype="int32"), (len(ref["ids"]), 1))
        out.update({k: np.asarray(v) for k, v in model({**x, "mask_positions": positions}).items()})
    real = ref["mask"].astype(bool)
    assert np.abs(out["sequence_output"][real] - ref["last_hidden_state"][real]).max() <= 1e-4
    return model, report, out, ref, real


@pytest.mark.parametrize(
    "name,activation,epsilon", [("eps_relu", "relu", 1e-3), ("gelu_new", "gelu_approximate", 1e-6)]
)
def test_config_fields_are_read(written, name, activation, epsilon):
    model, report, out, ref, _ = _imported(written / name)
    assert model.activation == activation and model.layer_norm_epsilon == epsilon
    assert np.abs(out["pooled_output"] - ref["pooler_output"]).max() <= 1e-4
    assert report.ok and not report.unexpected and not report.initialised


def test_pretraining_heads(written):
    model, report, out, ref, real = _imported(written / "pretraining")
    assert isinstance(model, kb.BertPretrainer) and not report.initialised and not report.unexpected
    assert np.abs(out["mlm_logits"][real] - ref["prediction_logits"][real]).max() <= 1e-4
    assert np.abs(out["nsp_logits"] - ref["seq_relationship_logits"]).max() <= 1e-4


def test_a_masked_lm_checkpoint_keeps_its_mlm_head(written):
    """BertForMaskedLM saves the MLM head without the NSP head or the pooler: it was refused as
    'does not fit the model... check that the config file belongs to these weights'."""
    model, report, out, ref, real = _imported(written / "masked_lm")
    assert isinstance(model, kb.BertPretrainer)
    assert np.abs(out["mlm_logits"][real] - ref["logits"][real]).max() <= 1e-4
    assert report.initialised == list(POOLER_NAMES + NSP_HEAD_NAMES) and not report.missing
    assert "fine-tune before using nsp_logits or pooled_output" in report.summary()


def test_a_next_sentence_checkpoint_keeps_its_nsp_head(written):
    model, report, out, ref, _ = _imported(written / "next_sentence")
    assert isinstance(model, kb.BertPretrainer)
    assert np.abs(out["nsp_logits"] - ref["logits"]).max() <= 1e-4
    assert report.initialised == list(MLM_HEAD_NAMES) and not report.missing
