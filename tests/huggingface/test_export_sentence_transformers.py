"""`export_sentence_transformers` and `kbert export --formats sentence_transformers`: the real
MiniLM as an embedder gives the real all-MiniLM-L6-v2's sentence-transformers files, and
SentenceTransformer(folder) (in the PyTorch venv) gives our `kbert embed` vectors."""

import json
import os

import numpy as np
import pytest

import keras_bert_impl as kb
from bench.corpora.mr_split import load_mr
from keras_bert_impl.cli import main
from keras_bert_impl.inspection.sentence_encoder import SentenceEncoder
from keras_bert_impl_export.huggingface import NotExpressibleError, export_sentence_transformers
from tests.conftest import DATA
from tests.side_venv import run_in_side_venv

MINILM = os.path.join(DATA, "minilm")
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sentence_transformers_child.py")
ST_FILES = ("modules.json", "sentence_bert_config.json", os.path.join("1_Pooling", "config.json"))


def _json(*parts):
    with open(os.path.join(*parts), encoding="utf-8") as f:
        return json.load(f)


def test_the_minilm_embedder_gives_the_real_folders_files(minilm_keras, tmp_path, capsys):
    """all-MiniLM-L6-v2 is mean pooling, L2-normalised, 256 wordpieces: its export through
    kbert export has the files of the real folder, key for key."""
    output = str(tmp_path / "st")
    assert (
        main(
            [
                "export",
                "--model",
                minilm_keras,
                "--output",
                output,
                "--formats",
                "sentence_transformers",
                "--pooling",
                "mean",
                "--normalize",
                "--seq-len",
                "256",
            ]
        )
        == 0
    )
    for name in ST_FILES:
        assert _json(output, name) == _json(MINILM, name), name
    assert os.path.isfile(os.path.join(output, "model.safetensors")) and os.path.isfile(
        os.path.join(output, "tokenizer.json")
    )
    assert (
        "SentenceTransformer(folder).encode(texts) gives mean pooling"
        in open(os.path.join(output, "README.md")).read()
    )
    assert "sentence-transformers folder" in capsys.readouterr().err


def test_the_flag_takes_the_embedders_poolings():
    from keras_bert_impl.commands.export import EMBEDDER_POOLING
    from keras_bert_impl.models.bert_embedder import POOLING

    assert EMBEDDER_POOLING == POOLING


def test_an_embedder_model_brings_its_own_settings_and_what_it_cannot_be_is_refused(tmp_path):
    backbone = kb.BertBackbone.from_preset(
        "bert_tiny", vocabulary_size=9, max_sequence_length=16, return_hidden_states=True
    )
    backbone.set_vocabulary(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "film", "dull", "##s"], lowercase=True
    )
    export_sentence_transformers(
        kb.BertEmbedder(backbone, pooling="cls", normalize=False), str(tmp_path / "cls"), max_seq_length=16
    )
    assert _json(tmp_path, "cls", "modules.json")[-1]["path"] == "1_Pooling"  # no Normalize module
    modes = _json(tmp_path, "cls", "1_Pooling", "config.json")
    assert [k for k, v in modes.items() if v is True] == ["pooling_mode_cls_token"]
    assert modes["word_embedding_dimension"] == backbone.hidden_dim
    with pytest.raises(NotExpressibleError, match="pools layer -2"):
        export_sentence_transformers(kb.BertEmbedder(backbone, layer_index=-2), str(tmp_path / "x"))
    with pytest.raises(ValueError, match="pooling='max' differs from the embedder's own pooling='mean'"):
        export_sentence_transformers(kb.BertEmbedder(backbone), str(tmp_path / "x"), pooling="max")
    with pytest.raises(NotExpressibleError, match="a BertClassifier is not a sentence embedder"):
        export_sentence_transformers(kb.BertClassifier(backbone, num_classes=2), str(tmp_path / "x"))
    with pytest.raises(ValueError, match="max_seq_length 512 is outside 3..16"):
        export_sentence_transformers(backbone, str(tmp_path / "x"), max_seq_length=512)
    with pytest.raises(
        ValueError, match=r"pooling must be one of \['cls', 'mean', 'max'\]. Received: pooling='sum'"
    ):
        export_sentence_transformers(backbone, str(tmp_path / "x"), pooling="sum")
    assert not os.path.exists(tmp_path / "x")


SETTINGS = [("mean", True), ("cls", False), ("max", True)]


@pytest.fixture(scope="module")
def vectors_in_sentence_transformers(minilm, tmp_path_factory):
    """(texts, {(pooling, normalize): (the child's report, its vectors)}): MiniLM exported at each
    of SETTINGS and encoded by SentenceTransformer, the three in one child process (its start and
    imports cost more than the encoding)."""
    all_texts, _ = load_mr(os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv"))
    texts = all_texts[:24] + all_texts[-24:]
    folder = tmp_path_factory.mktemp("st")
    (folder / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    args = []
    for index, (pooling, normalize) in enumerate(SETTINGS):
        export = str(folder / f"st_{index}")
        export_sentence_transformers(minilm, export, pooling=pooling, normalize=normalize, max_seq_length=32)
        args += [export, str(folder / "texts.json"), str(folder / f"vectors_{index}.npy")]
    printed = run_in_side_venv(".venv-torch", CHILD, *args).splitlines()
    reports = [json.loads(line) for line in printed if line.startswith('{"modules"')]
    assert len(reports) == len(SETTINGS), printed[-20:]
    return texts, {
        setting: (report, np.load(folder / f"vectors_{index}.npy"))
        for index, (setting, report) in enumerate(zip(SETTINGS, reports, strict=True))
    }


@pytest.mark.slow  # about 20 s or more: sentence-transformers in the PyTorch venv
@pytest.mark.parametrize("pooling, normalize", SETTINGS)
def test_sentence_transformers_gives_our_vectors(
    minilm, pooling, normalize, vectors_in_sentence_transformers
):
    """MR sentences, some longer than 32 wordpieces: SentenceTransformer(folder).encode equals
    kbert embed's SentenceEncoder at the same settings."""
    texts, results = vectors_in_sentence_transformers
    report, theirs = results[(pooling, normalize)]
    assert report == {
        "modules": ["Transformer", "Pooling"] + (["Normalize"] if normalize else []),
        "max_seq_length": 32,
    }
    ours = SentenceEncoder(minilm, pooling=pooling, normalize=normalize, sequence_length=32).encode(texts)
    np.testing.assert_allclose(theirs, ours, atol=1e-5)


@pytest.mark.slow  # about 20 s or more: 1,000 sentences through MiniLM on each side, in two processes
def test_sentence_transformers_gives_kbert_embeds_vectors_on_1000_reviews(minilm_keras, tmp_path):
    """The real all-MiniLM-L6-v2 recipe (mean, normalised, 256 wordpieces) through the two
    commands a user runs: `kbert export --formats sentence_transformers`, then
    SentenceTransformer(folder).encode against `kbert embed` on 1,000 MR review sentences
    (both classes): cosine >= 0.99999 on every one."""
    all_texts, _ = load_mr(os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv"))
    texts = all_texts[:500] + all_texts[-500:]
    folder = str(tmp_path / "st")
    assert (
        main(
            [
                "export",
                "--model",
                minilm_keras,
                "--output",
                folder,
                "--formats",
                "sentence_transformers",
                "--pooling",
                "mean",
                "--normalize",
                "--seq-len",
                "256",
            ]
        )
        == 0
    )
    lines = tmp_path / "reviews.txt"
    lines.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
    ours_path = str(tmp_path / "ours.npy")
    assert (
        main(
            [
                "embed",
                "--model",
                minilm_keras,
                "--pooling",
                "mean",
                "--normalize",
                "--seq-len",
                "256",
                "--output",
                ours_path,
                str(lines),
            ]
        )
        == 0
    )
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    theirs_path = str(tmp_path / "theirs.npy")
    run_in_side_venv(".venv-torch", CHILD, folder, str(tmp_path / "texts.json"), theirs_path)
    ours, theirs = np.load(ours_path), np.load(theirs_path)
    assert ours.shape == theirs.shape == (1000, 384)
    cosine = np.sum(ours * theirs, -1) / (np.linalg.norm(ours, axis=-1) * np.linalg.norm(theirs, axis=-1))
    assert cosine.min() >= 0.99999, cosine.min()


@pytest.mark.slow  # about 20 s or more: sentence-transformers in the PyTorch venv
def test_the_docs_snippet_loads_an_export(minilm, tmp_path):
    """docs/export.md's sentence-transformers snippet, run as written on an export at the path it
    names: the shape and the cosine of our own vectors of its two sentences."""
    from tests.test_readme import python_block

    texts = ["a gripping , funny film", "dull and slow"]
    backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=minilm.vocabulary_size)
    backbone.set_vocabulary(minilm.vocabulary, lowercase=True)
    export_sentence_transformers(backbone, str(tmp_path / "exports" / "minilm-st"))
    snippet = tmp_path / "snippet.py"
    snippet.write_text(python_block("docs/export.md", "### sentence-transformers"), encoding="utf-8")
    printed = run_in_side_venv(".venv-torch", str(snippet), cwd=str(tmp_path)).strip().splitlines()[-1]
    shape, cosine = printed.rsplit(" ", 1)
    ours = SentenceEncoder(backbone, pooling="mean", normalize=True, sequence_length=128).encode(texts)
    assert shape == f"({len(texts)}, {backbone.hidden_dim})"
    assert float(cosine) == pytest.approx(float(ours[0] @ ours[1]), abs=1e-5)
