"""Session-wide exports shared by the export tests: the conversions are the slow part, so
each model is fine-tuned and exported once per `make test`, by whichever pytest-xdist worker
asks first (tests/run_once.py); the other waits for it and reads the same folders.

The model is the real all-MiniLM-L6-v2 fine-tuned briefly on real MR sentences (a real
classifier, so int8's top-label agreement is measured on confident predictions, not on a
random head's near-ties); the export is checked on 500 other MR sentences."""

import csv
import os

import numpy as np
import pytest

from keras_bert_impl.cli import main
from tests.export.edge_reference import write_golden
from tests.run_once import make_target, once_per_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MR = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee2.csv")
TRAIN_EXAMPLES, VALIDATION_EXAMPLES = 640, 500
SEQ_LEN = 64


def mr_rows():
    """The MR file's (label, text) rows in a fixed shuffled order (the file is sorted by label)."""
    with open(MR, encoding="utf-8-sig", newline="") as f:
        rows = [(label, text.strip()) for label, text in csv.reader(f)]
    order = np.random.default_rng(0).permutation(len(rows))
    return [rows[i] for i in order]


def write_rows(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    return str(path)


@pytest.fixture(scope="session")
def mr_files(tmp_path_factory):
    if not os.path.isfile(MR):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    folder = tmp_path_factory.mktemp("mr")
    rows = mr_rows()
    train = write_rows(folder / "train.csv", rows[:TRAIN_EXAMPLES])
    validation = write_rows(
        folder / "validation.csv", rows[TRAIN_EXAMPLES : TRAIN_EXAMPLES + VALIDATION_EXAMPLES]
    )
    return {
        "train": train,
        "validation": validation,
        "validation_rows": rows[TRAIN_EXAMPLES : TRAIN_EXAMPLES + VALIDATION_EXAMPLES],
    }


@pytest.fixture(scope="session")
def mr_run(tmp_path_factory, minilm_keras, mr_files):
    """A kbert finetune run of MiniLM on 640 MR sentences (one epoch, mean pooling)."""

    def build(folder):
        run = str(folder / "mr")
        assert (
            main(
                [
                    "finetune",
                    "--task",
                    "classification",
                    "--init",
                    minilm_keras,
                    "--train",
                    mr_files["train"],
                    "--validation",
                    mr_files["validation"],
                    "--no-header",
                    "--columns",
                    "label,text",
                    "--seq-len",
                    str(SEQ_LEN),
                    "--epochs",
                    "1",
                    "--batch-size",
                    "16",
                    "--learning-rate",
                    "5e-5",
                    "--pooling",
                    "mean",
                    "--output",
                    run,
                    "--quiet",
                ]
            )
            == 0
        )
        return run

    return once_per_run(tmp_path_factory, "mr_run", build)


@pytest.fixture(scope="session")
def mr_export(tmp_path_factory, mr_run, mr_files):
    """Every format of the fine-tuned MR classifier, with its report on the 500 validation sentences
    (latency timed in one round: the tests check the report's fields, not the speed)."""

    def build(folder):
        output = str(folder / "mr")
        assert (
            main(
                [
                    "export",
                    "--model",
                    mr_run,
                    "--output",
                    output,
                    "--validation",
                    mr_files["validation"],
                    "--repeats",
                    "1",
                ]
            )
            == 0
        )
        return output

    return once_per_run(tmp_path_factory, "mr_export", build)


# --- the edge demos (tests/export/test_android_logic.py, test_web_demo.py) -----------------


@pytest.fixture(scope="session")
def edge_setup():
    """`make edge-setup`: Debian's chromium and junit4, web_demo's npm packages (quick when done)."""
    error = make_target("edge-setup")
    if error:
        pytest.fail(error)


@pytest.fixture(scope="session")
def edge_golden(tmp_path_factory, mr_export, mr_run, mr_files):
    """The pipeline's golden ids and logits for the Java and JavaScript tokenizers and apps:
    all 4,000 MR sentences, the hard cases, the bad input, Keras logits for 20 held-out sentences."""
    texts = [text for _, text in mr_rows()]
    held_out = [text for _, text in mr_files["validation_rows"]]
    return once_per_run(
        tmp_path_factory,
        "edge_golden",
        lambda folder: write_golden(folder / "golden.json", mr_export, mr_run, texts, held_out, SEQ_LEN),
    )
