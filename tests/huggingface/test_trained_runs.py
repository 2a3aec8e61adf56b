"""Models trained here, exported by `kbert export --formats huggingface` from their run folders
and loaded by transformers (`.venv-torch`) with AutoTokenizer: an MR classifier fine-tuned from
the real MiniLM (500 held-out sentences of the demo's split), a bert_tiny student distilled from
it, a WSJ part-of-speech tagger and a SQuAD reader (start/end logits on the reader's own windows), those
two fine-tuned from the first two of MiniLM's six layers.
Trained heads, not random ones: their top labels are confident, so "the same top label on every
sentence" (ties within 1e-5 aside, at most 1% of them) says something."""

import json
import os

import keras
import numpy as np
import pytest

from bench.corpora.mr_split import write_mr_split
from keras_bert_impl.cli import main
from keras_bert_impl.data.readers import SquadReader
from keras_bert_impl.tokenization import BertPreprocessor
from tests.conftest import DATA, REPO
from tests.huggingface.transformers_side import (
    check_loading_info,
    keras_outputs,
    transformers_outputs_of_many,
)

# MiniLM fine-tunes and subprocesses in .venv-torch, which make test-slow builds.
pytestmark = pytest.mark.slow

HELD_OUT = 500  # MR sentences of the demo's 80/20 split (also the training rows' count)
MR_LENGTH = 64
WSJ = os.path.join(DATA, "corpora", "tagged-en-wsj.txt")
WSJ_TRAIN, WSJ_HELD_OUT = 240, 100  # lines (word/TAG sentences) of tagged-en-wsj.txt
# The tagger trains on 64 pieces (longer lines cut, their tags still in the head) and is compared
# with transformers at 128: what is checked is the exported model's agreement, at any length.
WSJ_TRAIN_LENGTH = 64
SQUAD = os.path.join(REPO, "tests", "fixtures", "readers", "squad_v1.1_sample.json")
SQUAD_ARGS = ("--seq-len", "128", "--doc-stride", "32", "--max-query-length", "24")
# Top labels are compared where Keras' best two logits are further apart than this: the two
# sides differ by ~1e-7, so a tie closer than that may fall either way without a fault.
TIE = 1e-5


def _same_top_labels(theirs, ours):
    """theirs [N, C] and ours give the same argmax on every row that is not a tie (and ties are
    at most 1% of the rows)."""
    top_two = np.sort(ours, axis=-1)[:, -2:]
    decided = top_two[:, 1] - top_two[:, 0] > TIE
    assert decided.mean() >= 0.99, decided.mean()
    assert (theirs[decided].argmax(-1) == ours[decided].argmax(-1)).all()


@pytest.fixture(scope="module")
def mr(tmp_path_factory):
    """The first 500 sentences of each part of the demo's split, as headerless label,text CSVs."""
    folder = tmp_path_factory.mktemp("mr")
    texts, _, _, test_idx, train_csv, test_csv = write_mr_split(str(folder), subset=HELD_OUT)
    return {"train": train_csv, "test": test_csv, "test_texts": [texts[i] for i in test_idx]}


@pytest.fixture(scope="module")
def mr_run(tmp_path_factory, minilm_keras, mr):
    """kbert finetune of MiniLM on the 500 MR training rows: two epochs, the pooled [CLS] head (the
    head transformers has; its pooler was never trained for MR, hence the higher learning rate)."""
    run = str(tmp_path_factory.mktemp("runs") / "mr")
    assert (
        main(
            [
                "finetune",
                "--task",
                "classification",
                "--init",
                minilm_keras,
                "--train",
                mr["train"],
                "--validation",
                mr["test"],
                "--no-header",
                "--columns",
                "label,text",
                "--seq-len",
                str(MR_LENGTH),
                "--epochs",
                "2",
                "--batch-size",
                "16",
                "--learning-rate",
                "1e-4",
                "--output",
                run,
                "--quiet",
            ]
        )
        == 0
    )
    return run


def _export(run, folder):
    """`kbert export --formats huggingface` of a run folder; the loaded model and the folder."""
    assert main(["export", "--model", run, "--formats", "huggingface", "--output", folder]) == 0
    return keras.saving.load_model(os.path.join(run, "model.keras")), folder


def _same_ids_as_ours(model, texts, arrays, length):
    """AutoTokenizer's rows (padding cut off) are BertPreprocessor's: Keras on transformers' ids is
    Keras on its own pipeline."""
    x = BertPreprocessor.from_model(model, sequence_length=length)(texts)
    ours, our_mask = x["token_ids"].numpy(), x["padding_mask"].numpy().astype(bool)
    theirs, their_mask = arrays["input_ids"], arrays["attention_mask"].astype(bool)
    for row in range(len(texts)):
        assert ours[row][our_mask[row]].tolist() == theirs[row][their_mask[row]].tolist(), texts[row]


def _classifier_job(run, texts, folder):
    """The exported run and the forward transformers runs on it: the held-out sentences."""
    model, folder = _export(run, folder)
    return {
        "run": run,
        "model": model,
        "folder": folder,
        "texts": texts,
        "request": {"forward": {"texts": texts, "max_length": MR_LENGTH}},
    }


@pytest.fixture(scope="module")
def mr_job(mr_run, mr, tmp_path_factory):
    return _classifier_job(mr_run, mr["test_texts"], str(tmp_path_factory.mktemp("mr_transformers")))


@pytest.fixture(scope="module")
def student_job(mr_run, mr, tmp_path_factory):
    """kbert distill of a bert_tiny student from the MR run, exported."""
    student = str(tmp_path_factory.mktemp("runs") / "student")
    assert (
        main(
            [
                "distill",
                "--teacher",
                mr_run,
                "--student-preset",
                "bert_tiny",
                "--train",
                mr["train"],
                "--validation",
                mr["test"],
                "--epochs",
                "1",
                "--seq-len",
                str(MR_LENGTH),
                "--output",
                student,
                "--quiet",
            ]
        )
        == 0
    )
    return _classifier_job(student, mr["test_texts"], str(tmp_path_factory.mktemp("student_transformers")))


# The module's tests and the fixture that trains and exports the folder each loads in transformers.
JOBS = {
    "test_a_fine_tuned_mr_classifier": "mr_job",
    "test_a_distilled_bert_tiny_student": "student_job",
    "test_a_wsj_tagger": "tagger_job",
    "test_a_squad_reader": "reader_job",
}


@pytest.fixture(scope="module")
def transformers_side(request, tmp_path_factory):
    """transformers' (report, arrays) on the exported folder of every test of this module that
    runs, by its job fixture's name: all loaded in one `.venv-torch` child (its start and the
    PyTorch and transformers imports are paid once, not once per test)."""
    selected = [
        JOBS[item.originalname]
        for item in request.session.items
        if getattr(item, "module", None) is request.module and getattr(item, "originalname", None) in JOBS
    ]
    jobs = {name: request.getfixturevalue(name) for name in dict.fromkeys(selected)}
    results = transformers_outputs_of_many(
        [(job["folder"], job["request"]) for job in jobs.values()], tmp_path_factory.mktemp("transformers")
    )
    return dict(zip(jobs, results))


def _check_classifier(job, transformers_side):
    """The exported run in BertForSequenceClassification: logits within 1e-4 of Keras's, the same
    top label on every sentence, labels and validation metrics carried into the folder."""
    run, model, folder, texts = job["run"], job["model"], job["folder"], job["texts"]
    report, arrays = transformers_side
    check_loading_info(report)
    _same_ids_as_ours(model, texts, arrays, MR_LENGTH)
    ours = keras_outputs(model, arrays)["logits"]
    assert arrays["logits"].shape == ours.shape == (len(texts), 2)
    np.testing.assert_allclose(arrays["logits"], ours, atol=1e-4, rtol=0)
    _same_top_labels(arrays["logits"], ours)
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert [config["id2label"][str(i)] for i in range(2)] == list(model.label_names)
    with open(os.path.join(run, "metrics.json"), encoding="utf-8") as f:
        accuracy = json.load(f)["validation"]["accuracy"]
    with open(os.path.join(folder, "README.md"), encoding="utf-8") as f:
        assert f"| accuracy | {accuracy:.4f} |" in f.read()
    return model, arrays["logits"]


def test_a_fine_tuned_mr_classifier(mr_job, transformers_side):
    _, logits = _check_classifier(mr_job, transformers_side["mr_job"])
    # Trained: confident on most held-out sentences (a random head's logits sit near a tie;
    # measured: held-out accuracy 0.752, median margin 1.18).
    assert np.median(np.abs(logits[:, 1] - logits[:, 0])) > 0.5


def test_a_distilled_bert_tiny_student(student_job, transformers_side):
    """The path a user takes to publish a small model: kbert distill, then the same export."""
    model, _ = _check_classifier(student_job, transformers_side["student_job"])
    assert model.backbone.num_layers == 2 and model.backbone.hidden_dim == 128  # bert_tiny, not the teacher


# The tagger and the reader fine-tune MiniLM cut to its first two layers (its embeddings, those
# layers and its pooler, pretrained weights as they are): what they check is the head each is
# exported as and its agreement in transformers, not MiniLM's depth, which the MR classifier's
# export checks; the encoder's work is a third of MiniLM's.
SMALL_LAYERS = 2


@pytest.fixture(scope="module")
def small_minilm(minilm_keras, tmp_path_factory):
    """The real MiniLM's first SMALL_LAYERS layers as a .keras backbone with its vocabulary (its
    sequence output is MiniLM's hidden state after that layer)."""
    minilm = keras.saving.load_model(minilm_keras)
    small = type(minilm).from_config({**minilm.get_config(), "num_layers": SMALL_LAYERS})
    small.set_vocabulary(minilm.vocabulary, minilm.lowercase)
    kept = [(small.embeddings, minilm.embeddings), (small.pooler, minilm.pooler)]
    for ours, theirs in kept + list(zip(small.transformer_layers, minilm.transformer_layers)):
        ours.set_weights(theirs.get_weights())
    path = str(tmp_path_factory.mktemp("small_minilm") / "minilm_first_layers.keras")
    small.save(path)
    return path


def _wsj_lines():
    with open(WSJ, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


@pytest.fixture(scope="module")
def tagger_job(small_minilm, tmp_path_factory):
    """kbert finetune of a WSJ part-of-speech tagger on 240 lines, exported; transformers runs it
    on 100 held-out lines whose tags training saw."""
    tmp_path = tmp_path_factory.mktemp("tagger")
    lines = _wsj_lines()
    train = lines[:WSJ_TRAIN]
    tags = {token.rsplit("/", 1)[1] for line in train for token in line.split()}
    # Held-out lines whose tags training saw (validation refuses a tag the head does not have).
    held_out = [line for line in lines[WSJ_TRAIN:] if {t.rsplit("/", 1)[1] for t in line.split()} <= tags][
        :WSJ_HELD_OUT
    ]
    assert len(held_out) == WSJ_HELD_OUT
    train_path, held_out_path = tmp_path / "train.txt", tmp_path / "held_out.txt"
    train_path.write_text("\n".join(train) + "\n", encoding="utf-8")
    held_out_path.write_text("\n".join(held_out) + "\n", encoding="utf-8")
    run = str(tmp_path / "tagger")
    assert (
        main(
            [
                "finetune",
                "--task",
                "tagging",
                "--tag-format",
                "word/tag",
                "--init",
                small_minilm,
                "--train",
                str(train_path),
                "--validation",
                str(held_out_path),
                "--seq-len",
                str(WSJ_TRAIN_LENGTH),
                "--epochs",
                "1",
                "--batch-size",
                "16",
                "--learning-rate",
                "2e-4",
                "--output",
                run,
                "--quiet",
            ]
        )
        == 0
    )
    model, folder = _export(run, str(tmp_path / "transformers"))
    texts = [" ".join(token.rsplit("/", 1)[0] for token in line.split()) for line in held_out]
    return {
        "model": model,
        "folder": folder,
        "tags": tags,
        "texts": texts,
        "request": {"forward": {"texts": texts, "max_length": 128}},
    }


def test_a_wsj_tagger(tagger_job, transformers_side):
    """A part-of-speech tagger (Penn Treebank tags of tagged-en-wsj.txt) in
    BertForTokenClassification: logits at every real position within 1e-4 of Keras's on 100
    held-out sentences, the same tag everywhere."""
    model, folder, tags, texts = (tagger_job[key] for key in ("model", "folder", "tags", "texts"))
    assert len(texts) == WSJ_HELD_OUT
    report, arrays = transformers_side["tagger_job"]
    check_loading_info(report)
    _same_ids_as_ours(model, texts, arrays, 128)
    ours = keras_outputs(model, arrays)["logits"]
    real = arrays["attention_mask"] == 1  # [N, T]
    assert ours.shape[-1] == len(model.label_names) == len(tags)
    np.testing.assert_allclose(arrays["logits"][real], ours[real], atol=1e-4, rtol=0)
    _same_top_labels(arrays["logits"][real], ours[real])
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["architectures"] == ["BertForTokenClassification"]
    assert [config["id2label"][str(i)] for i in range(len(tags))] == list(model.label_names)


@pytest.fixture(scope="module")
def reader_job(small_minilm, tmp_path_factory):
    """kbert finetune of a SQuAD reader on the sample, exported, and the windows our SquadReader
    packs from it (question + context, 32-piece stride), which transformers is fed."""
    tmp_path = tmp_path_factory.mktemp("reader")
    run = str(tmp_path / "reader")
    assert (
        main(
            [
                "finetune",
                "--task",
                "squad",
                "--init",
                small_minilm,
                "--train",
                SQUAD,
                "--validation",
                SQUAD,
                *SQUAD_ARGS,
                "--epochs",
                "2",
                "--batch-size",
                "8",
                "--output",
                run,
                "--quiet",
            ]
        )
        == 0
    )
    model, folder = _export(run, str(tmp_path / "transformers"))
    reader = SquadReader(
        BertPreprocessor.from_model(model, sequence_length=128), doc_stride=32, max_query_length=24
    )
    batches = [x for x, _ in reader.read(SQUAD)]
    ids = {"input_ids": "token_ids", "token_type_ids": "segment_ids", "attention_mask": "padding_mask"}
    windows = {theirs: np.concatenate([x[ours].numpy() for x in batches]) for theirs, ours in ids.items()}
    np.savez(tmp_path / "windows.npz", **windows)
    return {
        "model": model,
        "folder": folder,
        "windows": windows,
        "features": len(reader.features),
        "request": {"forward": {"ids": str(tmp_path / "windows.npz")}},
    }


def test_a_squad_reader(reader_job, transformers_side):
    """A SQuAD v1.1 reader in BertForQuestionAnswering, fed the windows our SquadReader packs
    (question + context, 32-piece stride): start/end logits within 1e-4 of Keras's at every real
    position, the same best start and end in every window."""
    model, windows = reader_job["model"], reader_job["windows"]
    assert (
        len(windows["input_ids"]) == reader_job["features"] > 11
    )  # long contexts make several windows per question
    report, arrays = transformers_side["reader_job"]
    check_loading_info(report)
    ours = keras_outputs(model, arrays)
    real = arrays["attention_mask"] == 1
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(arrays[key][real], ours[key][real], atol=1e-4, rtol=0, err_msg=key)
        _same_top_labels(np.where(real, arrays[key], -np.inf), np.where(real, ours[key], -np.inf))
