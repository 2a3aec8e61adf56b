"""Fixtures the command tests share: a one-layer BERT with the real MiniLM vocabulary, real MR
rows to train and validate on, and a finished run of the one on the other."""

import contextlib
import csv
import io
import os

import pytest

from tests.run_once import once_per_run
from tests.harness import minilm_vocab_backbone

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MR = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee2.csv")


def save_small_bert(folder, num_layers=1, hidden_dim=16, intermediate_dim=32, dropout=0.1):
    """A small random BERT with the real MiniLM vocabulary saved as its asset, as `kbert convert`
    leaves one; returns the .keras path."""
    if not os.path.isdir(os.path.join(REPO, "data", "minilm")):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    backbone = minilm_vocab_backbone(num_layers, hidden_dim, intermediate_dim, dropout=dropout)
    path = str(folder / "tiny.keras")
    backbone.save(path)
    return path


@pytest.fixture(scope="session")
def tiny_init(tmp_path_factory):
    """A one-layer BERT with the real MiniLM vocabulary."""
    return save_small_bert(tmp_path_factory.mktemp("init"))


@pytest.fixture(scope="session")
def mr_files(tmp_path_factory):
    """80 MR rows to train on and 40 to validate, both classes, headerless like the original."""
    with open(MR, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))  # quoted fields, some with line breaks inside
    pos = [row for row in rows if row[0] == "1"]
    neg = [row for row in rows if row[0] == "-1"]
    folder = tmp_path_factory.mktemp("mr")
    train, dev = folder / "train.csv", folder / "dev.csv"
    for path, part in ((train, pos[:40] + neg[:40]), (dev, pos[40:60] + neg[40:60])):
        with open(path, "w", encoding="utf-8", newline="") as f:
            csv.writer(f, quoting=csv.QUOTE_ALL).writerows(part)
    return str(train), str(dev)


@pytest.fixture(scope="session")
def tiny_run(tiny_init, mr_files, tmp_path_factory):
    """A finished `kbert finetune` classification run of `tiny_init` on `mr_files` (one epoch,
    length 32, batch 8), trained once per test run (tests/run_once.py) for the tests that only
    read it or start from it (test_cli_errors, test_sigterm, test_training_commands' checks of a
    classification run and its QAT continuation each trained the same run for themselves). Its
    command's stderr is kept beside it: `tiny_run_stderr`."""
    from keras_bert_impl.cli import main

    train, dev = mr_files

    def build(folder):
        run = str(folder / "run")
        argv = ["finetune", "--task", "classification", "--train", train, "--validation", dev]
        argv += ["--init", tiny_init, "--output", run, "--epochs", "1", "--seq-len", "32"]
        argv += ["--batch-size", "8", "--quiet", "--no-header", "--columns", "label,text"]
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = main(argv)
        assert status == 0, err.getvalue()[-3000:]
        (folder / "finetune.stderr").write_text(err.getvalue(), encoding="utf-8")
        return run

    return once_per_run(tmp_path_factory, "tiny_run", build)


@pytest.fixture(scope="session")
def tiny_run_stderr(tiny_run):
    """What `tiny_run`'s `kbert finetune` wrote to stderr (its label counts among it)."""
    with open(os.path.join(os.path.dirname(tiny_run), "finetune.stderr"), encoding="utf-8") as f:
        return f.read()
