"""kbert attention / embed / index / search / plot-embeddings / word-senses on the real MiniLM
and real MR sentences, and their refusals of bad input (exit status 2, one line, nothing written)."""

import contextlib
import csv
import io
import json
import os

import keras
import numpy as np
import pytest

from keras_bert_impl.cli import main
from keras_bert_impl.inspection.sentence_encoder import SentenceEncoder
from keras_bert_impl.models import BertBackbone
from tests.conftest import DATA

MR = os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv")


@pytest.fixture(scope="module")
def mr_text(tmp_path_factory):
    """300 real MR sentences (150 of each label, the file holds positives first), a blank line in the middle,
    and their labels."""
    with open(MR, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    rows = rows[:150] + rows[-150:]
    folder = tmp_path_factory.mktemp("mr_text")
    texts = [text.strip() for _, text in rows]
    with open(folder / "mr.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(texts[:100] + [""] + texts[100:]) + "\n")
    with open(folder / "labels.txt", "w", encoding="utf-8") as f:
        f.write(
            "\n".join(
                [{"1": "positive", "-1": "negative"}[label] for label, _ in rows[:100]]
                + ["blank"]
                + [{"1": "positive", "-1": "negative"}[label] for label, _ in rows[100:]]
            )
            + "\n"
        )
    return {
        "text": str(folder / "mr.txt"),
        "labels": str(folder / "labels.txt"),
        "texts": texts[:100] + [""] + texts[100:],
    }


def _fails(argv, capsys, message):
    """The command exits 2 with one line on stderr that matches `message`."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    return err[0]


@pytest.mark.slow  # about 20 s or more: embeds sentences with MiniLM through kbert
def test_embed_npy_and_jsonl_keep_one_row_per_line(minilm, minilm_keras, mr_text, tmp_path, capsys):
    npy, jsonl = str(tmp_path / "v.npy"), str(tmp_path / "v.jsonl")
    assert (
        main(
            [
                "embed",
                mr_text["text"],
                "--model",
                minilm_keras,
                "--output",
                npy,
                "--normalize",
                "--batch-size",
                "16",
            ]
        )
        == 0
    )
    vectors = np.load(npy)
    assert vectors.shape == (301, 384)
    expected = SentenceEncoder(minilm, normalize=True).encode(mr_text["texts"])
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    assert (
        main(
            [
                "embed",
                mr_text["text"],
                "--model",
                minilm_keras,
                "--output",
                jsonl,
                "--pooling",
                "cls",
                "--layer",
                "-1",
                "-2",
            ]
        )
        == 0
    )
    with open(jsonl, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert (
        [r["line"] for r in rows] == list(range(1, 302))
        and rows[100]["text"] == ""
        and len(rows[0]["vector"]) == 768
    )
    assert [p for p in os.listdir(tmp_path) if p.startswith(".tmp")] == []


@pytest.fixture(scope="module")
def embedded_at_8(minilm_keras, mr_text, tmp_path_factory):
    """`kbert embed` of the 301 lines at --seq-len 8 (the .npy and the command's stderr), run once
    for the two tests below: the truncation line is read from this run, and its vectors are
    what plot-embeddings maps (the plot test checks counts and the image, not the vectors'
    length; a second MiniLM embed at the default length cost its own load and forward)."""
    npy = str(tmp_path_factory.mktemp("embedded") / "v.npy")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(["embed", mr_text["text"], "--model", minilm_keras, "--output", npy, "--seq-len", "8"])
    assert status == 0, err.getvalue()[-3000:]
    return npy, err.getvalue()


def test_embed_says_once_how_many_texts_were_truncated(embedded_at_8, minilm, mr_text):
    err = [line for line in embedded_at_8[1].splitlines() if "truncated" in line]
    assert len(err) == 1 and "--seq-len 8" in err[0]
    # The same vocabulary as minilm_keras (kbert convert of the same checkpoint).
    lengths = SentenceEncoder(minilm, sequence_length=8).pack(mr_text["texts"])[2]
    assert err[0].startswith(f"kbert embed: {int(lengths.sum())} of 301 texts")


def test_plot_embeddings(mr_text, embedded_at_8, tmp_path, capsys):
    npy, png = embedded_at_8[0], str(tmp_path / "map.png")
    assert np.load(npy).shape == (301, 384)
    assert main(["plot-embeddings", npy, "--labels", mr_text["labels"], "--output", png]) == 0
    assert "negative 150, positive 150" in capsys.readouterr().out
    from matplotlib.image import imread

    assert imread(png).shape[:2] == (700, 800)
    with open(tmp_path / "short.txt", "w") as f:
        f.write("a\nb\n")
    _fails(
        [
            "plot-embeddings",
            npy,
            "--labels",
            str(tmp_path / "short.txt"),
            "--output",
            str(tmp_path / "x.png"),
        ],
        capsys,
        "has 2 lines but VECTORS has 301 vectors",
    )
    assert not os.path.exists(tmp_path / "x.png")


@pytest.mark.slow  # about 20 s or more: indexes and searches with MiniLM through kbert
def test_index_and_search(mr_text, minilm_keras, tmp_path, capsys):
    index = str(tmp_path / "index")
    assert main(["index", mr_text["text"], "--model", minilm_keras, "--output", index]) == 0
    assert "skipped 1 blank lines" in capsys.readouterr().out
    assert main(["search", index, "a wonderful , moving film", "-k", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    scores = [hit["score"] for hit in result["results"]]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True) and scores[0] > 0.5
    assert result["results"][0]["text"] in mr_text["texts"]
    # The best hit is the exact nearest neighbour of the query's vector.
    encoder = SentenceEncoder(keras.saving.load_model(minilm_keras), normalize=True)
    texts = [t for t in mr_text["texts"] if t]
    best = int(np.argmax(encoder.encode(texts) @ encoder.encode(["a wonderful , moving film"])[0]))
    assert result["results"][0]["text"] == texts[best]


@pytest.mark.slow  # about 20 s or more: builds an index with MiniLM through kbert
def test_search_refuses_another_model_and_a_corrupt_index(mr_text, minilm, minilm_keras, tmp_path, capsys):
    index = str(tmp_path / "index")
    assert main(["index", mr_text["text"], "--model", minilm_keras, "--output", index]) == 0
    other = BertBackbone.from_config({**minilm.get_config(), "num_layers": 2})
    other.set_vocabulary(minilm.vocabulary, minilm.lowercase)
    other_path = str(tmp_path / "other.keras")
    other.save(other_path)
    _fails(
        ["search", index, "a film", "--model", other_path],
        capsys,
        "is not the model (or pooling) that built the index",
    )
    with open(os.path.join(index, "texts.jsonl"), "a", encoding="utf-8") as f:
        f.write('"an extra line"\n')
    _fails(["search", index, "a film"], capsys, "texts.jsonl does not match its checksum")
    _fails(["search", str(tmp_path), "a film"], capsys, "no manifest.json")
    _fails(
        ["index", mr_text["text"], "--model", minilm_keras, "--output", mr_text["text"]],
        capsys,
        "is not an index folder",
    )
    _fails(
        ["index", mr_text["text"], "--model", minilm_keras, "--output", index],
        capsys,
        "already exists: add --overwrite",
    )


@pytest.mark.slow  # about 20 s or more: MiniLM's attention maps through kbert
def test_attention_command(minilm_keras, tmp_path, capsys):
    png, page = str(tmp_path / "a.png"), str(tmp_path / "a.html")
    text = "The animal didn't cross the street because it was too tired"
    assert (
        main(
            [
                "attention",
                text,
                "--model",
                minilm_keras,
                "--layer",
                "5",
                "--head",
                "11",
                "--output",
                png,
                "--html",
                page,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "layer 5, head 11, 15 wordpieces" in out
        and os.path.getsize(png) > 10_000
        and os.path.getsize(page) > 10_000
    )
    # An existing picture is replaced only when asked.
    _fails(
        ["attention", "a text", "--model", minilm_keras, "--output", png],
        capsys,
        f"--output {png} already exists",
    )
    _fails(
        ["attention", "a text", "--model", minilm_keras, "--html", page],
        capsys,
        f"--html {page} already exists",
    )
    assert (
        main(["attention", " ".join(["word"] * 200), "--model", minilm_keras, "--output", png, "--overwrite"])
        == 0
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "longer than --seq-len 128" in err[0]


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["attention", "a text", "--layer", "6", "--output", "X.png"],
            "--layer 6 is out of range: this model has 6 layers",
        ),
        (
            ["attention", "a text", "--layer", "0", "--head", "12", "--output", "X.png"],
            "--head 12 is out of range: this model has 12 heads",
        ),
        (["attention", "a text"], "Say what to write"),
        (["attention", "a text", "--head", "1", "--output", "X.png"], "--head needs --layer"),
        (["embed", "EMPTY", "--output", "X.npy"], "is empty"),
        (["embed", "LATIN1", "--output", "X.npy"], "is not valid UTF-8"),
        (["embed", "TEXT", "--output", "X.txt"], "--output must end in .npy or .jsonl"),
        (
            ["embed", "TEXT", "--output", "X.npy", "--layer", "9"],
            "--layer 9 is out of range for this 6-layer model",
        ),
        (["embed", "TEXT", "--output", "X.npy", "--seq-len", "1000"], "--seq-len 1000 is outside 3..512"),
        (["embed", "NOFILE", "--output", "X.npy"], "no such file"),
        (["index", "BLANK", "--output", "XDIR"], "has only blank lines"),
        (["word-senses", "zebra", "--file", "TEXT", "--output", "X.png"], "occurs in 0 line(s)"),
        (["word-senses", "two words", "--file", "TEXT", "--output", "X.png"], "WORD must be one word"),
    ],
)
def test_bad_input(argv, message, minilm_keras, tmp_path, capsys):
    files = {
        "EMPTY": b"",
        "LATIN1": "caf\u00e9 cr\u00e8me\n".encode("latin-1"),
        "TEXT": b"a good film\na bad film\n",
        "BLANK": b"\n  \n",
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    argv = [
        str(tmp_path / a) if a in files or a == "NOFILE" else str(tmp_path / a) if a.startswith("X") else a
        for a in argv
    ]
    _fails(argv + ["--model", minilm_keras], capsys, message)
    assert sorted(os.listdir(tmp_path)) == sorted(files)  # nothing written


def test_index_refuses_to_replace_the_folder_that_holds_its_file(minilm_keras, tmp_path, capsys):
    # --overwrite replaces the whole index folder: a FILE kept inside it would be deleted with it.
    index = tmp_path / "index"
    index.mkdir()
    (index / "manifest.json").write_text("{}")
    (index / "texts.txt").write_text("a good film\n")
    _fails(
        ["index", str(index / "texts.txt"), "--model", minilm_keras, "--output", str(index), "--overwrite"],
        capsys,
        f"--output {index} holds FILE {index / 'texts.txt'}",
    )
    assert sorted(os.listdir(index)) == ["manifest.json", "texts.txt"]


def test_unknown_pooling_is_an_argument_error(minilm_keras, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["embed", "x.txt", "--model", minilm_keras, "--output", "x.npy", "--pooling", "avg"])
    assert exit_info.value.code == 2 and "invalid choice: 'avg'" in capsys.readouterr().err


@pytest.mark.slow  # about 20 s or more: MiniLM over many sentences through kbert
def test_word_senses_picture(minilm_keras, mr_text, tmp_path, capsys):
    png = str(tmp_path / "film.png")
    assert (
        main(
            [
                "word-senses",
                "film",
                "--file",
                mr_text["text"],
                "--model",
                minilm_keras,
                "--output",
                png,
                "--max-sentences",
                "40",
            ]
        )
        == 0
    )
    assert "occurrences of 'film' in" in capsys.readouterr().out and os.path.getsize(png) > 10_000
