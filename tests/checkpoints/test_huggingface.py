"""The genuine all-MiniLM-L6-v2 weights through the safetensors importer, against
PyTorch + transformers outputs pinned in tests/fixtures/minilm_reference.npz.

Regenerate the fixture (own venv, never the project's):
    python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install torch==2.13.0 transformers==5.23.0 \\
        tokenizers==0.23.3 numpy
    HF_HUB_OFFLINE=1 /tmp/refvenv/bin/python tests/fixtures/make_minilm_reference.py
"""

import json
import os
import shutil

import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.checkpoints import CheckpointMismatchError, convert_checkpoint

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "minilm_reference.npz")


@pytest.fixture(scope="module")
def minilm(data_dir_module):
    return convert_checkpoint(os.path.join(data_dir_module, "minilm"), format="huggingface")


@pytest.fixture(scope="module")
def data_dir_module():
    from tests.conftest import DATA

    if not os.path.isdir(os.path.join(DATA, "minilm")):
        pytest.fail("data/minilm is missing: run `make data`.")
    return DATA


def test_minilm_matches_transformers(minilm):
    model, report = minilm
    assert isinstance(model, kb.BertBackbone)
    assert len(report.mapped) == 103 and not report.unexpected and not report.missing
    assert [n for n, _ in report.ignored] == ["embeddings.position_ids"]
    ref = np.load(FIXTURE)
    assert len(ref["sentences"]) >= 8 and (ref["attention_mask"] == 0).any()
    x = {
        "token_ids": ref["input_ids"],
        "segment_ids": ref["token_type_ids"],
        "padding_mask": ref["attention_mask"],
    }
    embedder = kb.BertEmbedder(model, pooling="mean", normalize=True)
    # Called eagerly on the one batch: predict() traced a function for each of the two models.
    out = {key: np.asarray(value) for key, value in model(x, training=False).items()}
    real = ref["attention_mask"].astype(bool)
    hidden_diff = np.abs(out["sequence_output"][real] - ref["last_hidden_state"][real]).max()
    pooled_diff = np.abs(out["pooled_output"] - ref["pooler_output"]).max()
    emb = np.asarray(embedder(x, training=False)["embeddings"])
    cosine = (
        (emb * ref["sentence_embedding"]).sum(-1)
        / np.linalg.norm(emb, axis=-1)
        / np.linalg.norm(ref["sentence_embedding"], axis=-1)
    )
    print(
        f"MiniLM vs transformers: hidden {hidden_diff:.2e}, pooled {pooled_diff:.2e}, min cosine "
        f"{cosine.min():.8f}"
    )
    assert hidden_diff <= 1e-4
    assert pooled_diff <= 1e-4
    assert cosine.min() >= 0.99999


def test_the_report_names_the_checkpoints_own_tensors(minilm, data_dir_module):
    """The report's "checkpoint" names were Google's (bert/embeddings/word_embeddings), which the
    safetensors file it names as its source does not hold."""
    from safetensors import safe_open

    _, report = minilm
    with safe_open(os.path.join(data_dir_module, "minilm", "model.safetensors"), "np") as f:
        names = set(f.keys())
    assert len(report.mapped) == 103 and {c for c, _, _ in report.mapped} <= names
    assert (
        "embeddings.word_embeddings.weight",
        "embeddings/token_embedding/embeddings",
        (30522, 384),
    ) in report.mapped


def test_minilm_keeps_vocab_and_casing(minilm):
    model, _ = minilm
    assert model.lowercase is True
    assert (
        len(model.vocabulary) == 30522
        and model.vocabulary[101] == "[CLS]"
        and model.vocabulary[1996] == "the"
    )
    assert model.activation == "gelu" and model.num_layers == 6 and model.hidden_dim == 384


def _copy_without_weights(src, dst):
    for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, name), dst / name)


def test_a_folder_without_vocab_txt_reads_tokenizer_json(minilm, data_dir_module, tmp_path):
    """transformers 5 saves a BERT tokenizer as tokenizer.json and tokenizer_config.json, without
    vocab.txt: such a folder was refused ('No vocabulary at .../vocab.txt'). The WordPiece vocabulary
    and the normalizer's casing come from tokenizer.json (here MiniLM's, written by tokenizers)."""
    src = os.path.join(data_dir_module, "minilm")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        os.symlink(os.path.join(src, name), tmp_path / name)
    model, _ = convert_checkpoint(str(tmp_path), format="huggingface")
    reference, _ = minilm
    assert (
        model.vocabulary == reference.vocabulary
        and len(model.vocabulary) == 30522
        and model.lowercase is True
    )
    tokenizer = json.loads(open(os.path.join(src, "tokenizer.json"), encoding="utf-8").read())
    os.unlink(tmp_path / "tokenizer.json")
    tokenizer["normalizer"]["lowercase"] = False  # as a cased model's
    (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    assert convert_checkpoint(str(tmp_path), format="huggingface")[0].lowercase is False
    tokenizer["model"] = {"type": "BPE", "vocab": {}, "merges": []}
    (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    with pytest.raises(
        ValueError, match=rf"{tmp_path / 'tokenizer.json'}: its model is 'BPE', not BERT's WordPiece"
    ):
        convert_checkpoint(str(tmp_path), format="huggingface")


def test_a_tokenizer_json_whose_wordpiece_vocab_is_a_list_is_refused_by_name(
    data_dir_module, tmp_path, capsys
):
    """A WordPiece `vocab` written as a JSON list (tokenizers itself refuses it: "invalid type:
    sequence, expected a map") ended `kbert convert` in AttributeError: 'list' object has no
    attribute 'get', exit 1."""
    from keras_bert_impl.cli import main

    src = os.path.join(data_dir_module, "minilm")
    for name in ("config.json", "model.safetensors"):
        os.symlink(os.path.join(src, name), tmp_path / name)
    tokenizer = json.loads(open(os.path.join(src, "tokenizer.json"), encoding="utf-8").read())
    vocab = tokenizer["model"]["vocab"]
    tokenizer["model"]["vocab"] = sorted(vocab, key=vocab.get)
    (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    output = tmp_path / "out.keras"
    assert main(["convert", str(tmp_path), "--format", "huggingface", "--output", str(output)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"kbert convert: {tmp_path / 'tokenizer.json'}: model.vocab is a JSON list, but WordPiece's is an "
        "object of token -> id (as the tokenizers library writes and reads it): give the checkpoint's "
        "vocab.txt, or a tokenizer.json saved by tokenizers or transformers."
    ], err
    assert not output.exists()
    tokenizer["model"]["vocab"] = {token: str(i) for i, token in enumerate(tokenizer["model"]["vocab"])}
    (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    with pytest.raises(ValueError, match="model.vocab is an object whose ids are not all integers"):
        convert_checkpoint(str(tmp_path), format="huggingface")


def test_pickle_refused_without_opt_in(data_dir_module, tmp_path):
    _copy_without_weights(os.path.join(data_dir_module, "minilm"), tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(ValueError, match="pickle file, and unpickling can run arbitrary code"):
        convert_checkpoint(str(tmp_path), format="huggingface")


def test_wrong_config_names_tensors_and_loads_nothing(data_dir_module, tmp_path):
    src = os.path.join(data_dir_module, "minilm")
    _copy_without_weights(src, tmp_path)
    os.symlink(os.path.join(src, "model.safetensors"), tmp_path / "model.safetensors")
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_hidden_layers"] = 7
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        CheckpointMismatchError, match="Missing from the checkpoint \\(16\\): bert/encoder/layer_6/"
    ):
        convert_checkpoint(str(tmp_path), format="huggingface")


def test_missing_config_field(data_dir_module, tmp_path):
    _copy_without_weights(os.path.join(data_dir_module, "minilm"), tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["hidden_size"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="missing fields \\['hidden_size'\\]"):
        convert_checkpoint(str(tmp_path), format="huggingface")
