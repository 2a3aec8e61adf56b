"""kbert pretrain / finetune / evaluate / predict end to end on a tiny model with the
real MiniLM vocabulary, real MR sentences and the hand-written reader fixtures; and
every bad input the training issue lists, refused before training starts."""

import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.tokenization.vocabulary import read_vocabulary
from keras_bert_impl.cli import main
from keras_bert_impl.inference.precision import computes_in
from keras_bert_impl.training.backup_and_restore import STATE_FILE
from tests.commands.conftest import save_small_bert
from tests.commands.model_loads import load_each_file_once

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "readers")
MR = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee2.csv")
REVIEWS = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee1.csv")
FAST = ["--epochs", "1", "--seq-len", "32", "--batch-size", "8", "--quiet"]


def _finetune(init, output, task, train, validation, *extra):
    return main(
        [
            "finetune",
            "--task",
            task,
            "--train",
            train,
            "--validation",
            validation,
            "--init",
            init,
            "--output",
            str(output),
            *FAST,
            *extra,
        ]
    )


def _json_line(text):
    return json.loads(text.strip().splitlines()[-1])


@pytest.mark.slow  # about 20 s or more: evaluates and predicts through the CLI (and the shared fine-tune)
def test_classification_finetune_evaluate_predict(
    tiny_run, tiny_run_stderr, mr_files, tmp_path, capsys, monkeypatch
):
    """`tiny_run` is this fine-tune: `_finetune(tiny_init, run, "classification", train, dev,
    "--no-header", "--columns", "label,text")`, trained once for the tests that read it. Nothing
    here trains: its model.keras is loaded once for the six loads below (tests/commands/model_loads.py)."""
    load_each_file_once(monkeypatch, {})
    _, dev = mr_files
    run = pathlib.Path(tiny_run)
    # One epoch: the best epoch is the final model (no best.keras copy), the backup is gone.
    assert sorted(os.listdir(run)) == ["logs", "metrics.json", "model.keras", "run.json", "task.json"]
    model = keras.saving.load_model(run / "model.keras")
    # Labels and vocabulary travel inside the model file.
    assert model.label_names == ["-1", "1"]
    assert model.backbone.vocabulary == read_vocabulary(os.path.join(REPO, "data", "minilm", "vocab.txt"))
    assert os.listdir(run / "logs")  # TensorBoard event files
    with open(run / "metrics.json") as f:
        metrics = json.load(f)
    assert "labels: --train '-1' 40, '1' 40; --validation '-1' 20, '1' 20" in tiny_run_stderr

    # evaluate reads the layout (headerless, label,text) from the run's task.json.
    assert main(["evaluate", "--model", str(run), "--data", dev, "--json"]) == 0
    evaluated = _json_line(capsys.readouterr().out)
    assert evaluated["examples"] == 40 and "num_examples" not in evaluated  # one name for the count
    assert main(["evaluate", "--model", str(run), "--data", dev]) == 0
    plain = capsys.readouterr().out.splitlines()
    assert "examples: 40" in plain and "per_class:" in plain
    header = plain[plain.index("per_class:") + 1].split()
    assert header[:3] == ["precision", "recall", "f1"] and "support" in header
    rows = {line.split()[0]: line.split() for line in plain[plain.index("per_class:") + 2 :]}
    assert set(rows) == {"-1", "1"}
    assert sum(int(rows[name][1 + header.index("support")]) for name in rows) == 40
    # --header overrides the run's headerless layout for a file that has one.
    headed = tmp_path / "dev_with_header.csv"
    headed.write_text("label,text\n" + open(dev, encoding="utf-8").read(), encoding="utf-8")
    assert main(["evaluate", "--model", str(run), "--data", str(headed), "--json"]) == 2
    # The header row is said to be one (it was read as a row of label 'label'), with the flag that reads it.
    err = capsys.readouterr().err
    assert (
        f"{headed}:1: the first row ['label', 'text'] is a header" in err
        and "read it with --header (without --columns)" in err
    ), err
    assert main(["evaluate", "--model", str(run), "--data", str(headed), "--json", "--header"]) == 0
    assert _json_line(capsys.readouterr().out)["examples"] == 40
    assert evaluated["accuracy"] == pytest.approx(metrics["validation"]["accuracy"], abs=1e-9)

    assert (
        main(
            [
                "predict",
                "--model",
                str(run / "model.keras"),
                "--json",
                "a gripping , funny film",
                "dull and slow",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [r["text"] for r in rows] == ["a gripping , funny film", "dull and slow"]
    assert all(r["label"] in ("-1", "1") and 0.5 <= r["probability"] <= 1 for r in rows)


def _files(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow  # about 20 s or more: several training runs into run folders
def test_finished_run_is_left_alone_and_another_run_is_never_overwritten(
    tiny_init, mr_files, tmp_path, capsys
):
    train_given, dev = mr_files
    train = tmp_path / "train.csv"
    train.write_bytes(open(train_given, "rb").read())
    run = tmp_path / "run"
    args = ("--no-header", "--columns", "label,text", "--epochs", "2")
    assert _finetune(tiny_init, run, "classification", str(train), dev, *args) == 0
    record = json.loads((run / "run.json").read_text())
    assert record["state"] == "finished" and record["settings"]["learning_rate"] == 5e-05
    assert set(record["inputs"]) == {"train", "validation", "init"}
    best = json.loads((run / "metrics.json").read_text())["best"]
    assert best["file"] == ("model.keras" if best["epoch"] == 1 else "best.keras")
    assert (run / "best.keras").exists() == (best["file"] == "best.keras") and not (run / "backup").exists()
    before = _files(run)
    capsys.readouterr()

    # The same command again: nothing trained, nothing written.
    assert _finetune(tiny_init, run, "classification", str(train), dev, *args) == 0
    assert "already holds this finished run" in capsys.readouterr().err
    assert _files(run) == before
    # Other settings, an edited training file: refused with what differs, nothing written.
    assert _finetune(tiny_init, run, "classification", str(train), dev, *args, "--learning-rate", "1e-4") == 2
    assert "--learning-rate 5e-05 then, 0.0001 now" in capsys.readouterr().err
    with open(train, "a", encoding="utf-8") as f:
        f.write('"1","one more row"\n')
    assert _finetune(tiny_init, run, "classification", str(train), dev, *args) == 2
    err = capsys.readouterr().err
    assert f"--train {train} changed since" in err and "--overwrite" in err
    assert _files(run) == before
    # --overwrite replaces the run.
    assert _finetune(tiny_init, run, "classification", str(train), dev, *args, "--overwrite") == 0
    assert (run / "model.keras").read_bytes() != before[run / "model.keras"]
    assert (
        json.loads((run / "run.json").read_text())["inputs"]["train"]["sha256"]
        != record["inputs"]["train"]["sha256"]
    )
    # A finished run with a result deleted is refused, not reported finished; --overwrite trains it again.
    os.remove(run / "metrics.json")
    assert _finetune(tiny_init, run, "classification", str(train), dev, *args) == 2
    assert "holds a finished run whose metrics.json is gone: add --overwrite" in capsys.readouterr().err
    assert _finetune(tiny_init, run, "classification", str(train), dev, *args, "--overwrite") == 0
    assert (run / "metrics.json").exists()

    # A folder of someone else's files, --overwrite or not, and a file as --output.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    for extra in ((), ("--overwrite",)):
        assert _finetune(tiny_init, other, "classification", str(train), dev, *args, *extra) == 2
        assert "holds files a kbert run does not write (notes.txt)" in capsys.readouterr().err
    assert sorted(os.listdir(other)) == ["notes.txt"]
    assert _finetune(tiny_init, other / "notes.txt", "classification", str(train), dev, *args) == 2
    assert "is a file, not a folder" in capsys.readouterr().err

    # Through the real entry point: status 2, one line, no traceback, nothing written.
    with open(train, "a", encoding="utf-8") as f:
        f.write('"-1","and another"\n')
    before = _files(run)
    for argv, message in (
        (
            [
                "finetune",
                "--task",
                "classification",
                "--train",
                str(train),
                "--validation",
                dev,
                "--init",
                tiny_init,
                "--output",
                str(run),
                *FAST,
                *args,
            ],
            f"--train {train} changed since",
        ),
        (
            [
                "finetune",
                "--task",
                "classification",
                "--train",
                str(train),
                "--validation",
                dev,
                "--init",
                tiny_init,
                "--output",
                str(other),
                *FAST,
                *args,
                "--overwrite",
            ],
            "holds files a kbert run does not write",
        ),
        (
            [
                "convert",
                os.path.join(REPO, "data", "minilm"),
                "--format",
                "huggingface",
                "--output",
                tiny_init,
            ],
            "already exists: add --overwrite",
        ),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "keras_bert_impl.cli", *argv],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=REPO),
            timeout=300,
        )
        assert done.returncode == 2 and message in done.stderr, done.stderr[-2000:]
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert _files(run) == before and sorted(os.listdir(other)) == ["notes.txt"]


@pytest.mark.slow  # about 20 s or more: several fine-tune commands on bad labels
def test_labels_are_checked_before_training(tiny_init, mr_files, tmp_path, capsys):
    _, dev = mr_files
    one_class, spellings = tmp_path / "one.csv", tmp_path / "spellings.csv"
    one_class.write_text("".join(f'"1","good film {i}"\n' for i in range(12)), encoding="utf-8")
    rows = [("1", "good"), ("1.0", "fine"), ("-1", "bad"), ("1", "great"), ("-1", "dull"), ("-1.0", "flat")]
    spellings.write_text("".join(f'"{label}","{text}"\n' for label, text in rows), encoding="utf-8")
    args = ("--no-header", "--columns", "label,text")
    assert _finetune(tiny_init, tmp_path / "a", "classification", str(one_class), dev, *args) == 2
    assert f"--train {one_class} has one label only ('1' on all 12 rows)" in capsys.readouterr().err
    assert _finetune(tiny_init, tmp_path / "b", "classification", str(spellings), dev, *args) == 2
    err = capsys.readouterr().err
    assert (
        "look like spellings of one label: '-1' (2 rows) and '-1.0' (1 rows); '1' (2 rows) and '1.0' (1 rows)"
        in err
    )
    assert "--allow-label-variants" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # Asked for, the variants are classes of their own (the validation file has no 1.0 or -1.0).
    assert (
        _finetune(
            tiny_init, tmp_path / "b", "classification", str(spellings), dev, *args, "--allow-label-variants"
        )
        == 0
    )
    assert (
        "labels: --train '-1' 2, '1' 2, '-1.0' 1, '1.0' 1; --validation '-1' 20, '1' 20"
        in capsys.readouterr().err
    )
    assert keras.saving.load_model(tmp_path / "b" / "model.keras").label_names == ["-1", "-1.0", "1", "1.0"]


def test_label_variants_and_multilabel_validation_warning():
    from keras_bert_impl.commands.label_checks import report_labels, variants

    assert variants(["pos", "Pos ", "neg", "1", "1.0", "01", "2", "NaN", "nan"]) == [
        ["01", "1", "1.0"],
        ["NaN", "nan"],
        ["Pos ", "pos"],
    ]
    lines = []
    report_labels(
        "multilabel", {"sports": 3, "politics": 2, "tech": 1}, "d.jsonl", {"sports": 1}, log=lines.append
    )
    assert lines[-1].startswith("warning: no --validation d.jsonl row has the label(s) 'politics', 'tech'")


@pytest.mark.slow  # about 20 s or more: a fine-tune with a held-out split
def test_validation_split_holds_out_a_stratified_part_the_run_keeps(tiny_init, mr_files, tmp_path, capsys):
    train, dev = mr_files
    run = tmp_path / "run"
    argv = [
        "finetune",
        "--task",
        "classification",
        "--train",
        train,
        "--init",
        tiny_init,
        "--output",
        str(run),
        "--no-header",
        "--columns",
        "label,text",
        *FAST,
    ]
    assert main([*argv, "--validation-split", "0.25"]) == 0
    assert "60 rows to train on, 20 held out" in capsys.readouterr().err
    held = [json.loads(line) for line in (run / "split" / "validation.jsonl").read_text().splitlines()]
    kept = [json.loads(line) for line in (run / "split" / "train.jsonl").read_text().splitlines()]
    assert sorted(r["label"] for r in held) == ["-1"] * 10 + ["1"] * 10  # stratified: 25% of each class
    with open(train, encoding="utf-8", newline="") as f:
        rows = [{"label": label, "text": text} for label, text in csv.reader(f)]

    def key(row):
        return json.dumps(row, sort_keys=True)

    assert sorted(map(key, held + kept)) == sorted(map(key, rows))  # every row, once
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["validation"]["num_examples"] == 20 and metrics["validation_file"] == str(
        run / "split" / "validation.jsonl"
    )
    assert (
        main(["evaluate", "--model", str(run), "--data", str(run / "split" / "validation.jsonl"), "--json"])
        == 0
    )
    assert _json_line(capsys.readouterr().out)["accuracy"] == pytest.approx(
        metrics["validation"]["accuracy"], abs=1e-9
    )
    # The same command again (the same split, drawn by --seed): the finished run is left alone.
    assert main([*argv, "--validation-split", "0.25"]) == 0
    assert "already holds this finished run" in capsys.readouterr().err
    for extra, message in (
        (["--validation-split", "0.25", "--validation", dev], "exactly one of them"),
        ([], "exactly one of them"),
        (["--validation-split", "1.5"], "--validation-split must be a fraction in (0, 1)"),
    ):
        assert main([*argv[: -len(FAST)], *FAST, *extra]) == 2, extra
        assert message in capsys.readouterr().err
    ner = os.path.join(FIXTURES, "ner_train.conll")
    assert (
        main(
            [
                "finetune",
                "--task",
                "tagging",
                "--train",
                ner,
                "--init",
                tiny_init,
                "--output",
                str(tmp_path / "t"),
                "--validation-split",
                "0.2",
                *FAST,
            ]
        )
        == 2
    )
    assert "give --task tagging a --validation file" in capsys.readouterr().err


class _Interrupted(Exception):
    pass


def _interrupted(monkeypatch, run, step):
    """Runs `run()` and stops it after training step `step` (the backups written up to then
    stay, as after a kill)."""
    from keras_bert_impl.training import BackupAndRestore

    saving = BackupAndRestore.on_train_batch_end

    def stop(self, batch, logs=None):
        saving(self, batch, logs)
        if int(self.model.optimizer.iterations.numpy()) == step:
            raise _Interrupted

    with monkeypatch.context() as patch:
        patch.setattr(BackupAndRestore, "on_train_batch_end", stop)
        with pytest.raises(_Interrupted):
            run()


@pytest.mark.slow  # about 20 s or more: an uninterrupted, an interrupted and a resumed run
def test_interrupted_then_rerun_gives_the_uninterrupted_weights_across_an_epoch_boundary(
    tiny_init, mr_files, tmp_path, capsys, monkeypatch
):
    # 10 steps an epoch, a backup every 3. The run stops after step 7 (what a kill leaves:
    # the backup of step 6); the rerun trains steps 7-20 and crosses into the second epoch,
    # whose order a tf.data reshuffle under the strategy's fit did not repeat (weights 1.2e-4 off).
    train, dev = mr_files
    args = ("--no-header", "--columns", "label,text", "--epochs", "2", "--save-every", "3")
    assert _finetune(tiny_init, tmp_path / "reference", "classification", train, dev, *args) == 0
    reference = keras.saving.load_model(tmp_path / "reference" / "model.keras").get_weights()

    _interrupted(
        monkeypatch, lambda: _finetune(tiny_init, tmp_path / "run", "classification", train, dev, *args), 7
    )
    assert not (tmp_path / "run" / "model.keras").exists()
    capsys.readouterr()
    # A corrupt backup is an error, never a silent fresh start.
    state = tmp_path / "run" / "backup" / STATE_FILE
    intact = state.read_bytes()
    state.write_bytes(intact[:1000])
    assert _finetune(tiny_init, tmp_path / "run", "classification", train, dev, *args) == 2
    assert "is corrupt and cannot be read" in capsys.readouterr().err
    state.write_bytes(intact)
    assert _finetune(tiny_init, tmp_path / "run", "classification", train, dev, *args) == 0
    assert "resumed from the backup at step 6 of 20" in capsys.readouterr().err
    for a, b in zip(reference, keras.saving.load_model(tmp_path / "run" / "model.keras").get_weights()):
        np.testing.assert_array_equal(a, b)
    # That was with length-bucketed batches, finetune's default.
    assert json.loads((tmp_path / "run" / "task.json").read_text())["length_buckets"] is True
    # Both epochs in metrics.json; the second ran whole in the rerun, so its validation is the reference's.
    history = json.loads((tmp_path / "run" / "metrics.json").read_text())["history"]
    reference_history = json.loads((tmp_path / "reference" / "metrics.json").read_text())["history"]
    assert len(history["val_loss"]) == 2
    assert history["val_loss"][1] == reference_history["val_loss"][1]


# The fixtures each head fine-tunes on (train, validation, extra flags).
HEADS = {
    "pair": ("nli_pairs.tsv", "nli_pairs.tsv", ()),
    "multilabel": ("topics_train.jsonl", "topics_dev.jsonl", ()),
    "tagging": ("ner_train.conll", "ner_train.conll", ()),
    "squad": (
        "squad_v1.1_sample.json",
        "squad_v1.1_sample.json",
        ("--doc-stride", "8", "--max-query-length", "12"),
    ),
}


@pytest.fixture(scope="module")
def head_run(tiny_init, tmp_path_factory):
    """`head_run(task)`: the run folder of `_finetune(tiny_init, run, task, *HEADS[task])`, trained
    the first time a test of this module asks for it (the tagger and the span labeler are read by
    two tests each)."""
    runs = {}

    def get(task):
        if task not in runs:
            train, dev, extra = HEADS[task]
            run = tmp_path_factory.mktemp(task) / "run"
            train, dev = os.path.join(FIXTURES, train), os.path.join(FIXTURES, dev)
            assert _finetune(tiny_init, run, task, train, dev, *extra) == 0
            runs[task] = run
        return runs[task]

    return get


@pytest.mark.parametrize(
    "task, metric",
    [("pair", "accuracy"), ("multilabel", "micro_f1"), ("tagging", "entity_f1"), ("squad", "exact_match")],
)
@pytest.mark.slow  # about 20 s or more: a fine-tune and an evaluation for each head
def test_every_head_finetunes_and_evaluates(head_run, capsys, task, metric):
    run = head_run(task)
    dev = os.path.join(FIXTURES, HEADS[task][1])
    capsys.readouterr()
    assert main(["evaluate", "--model", str(run), "--data", dev, "--json"]) == 0
    evaluated = _json_line(capsys.readouterr().out)
    assert evaluated["task"] == task and metric in evaluated
    with open(run / "metrics.json") as f:
        assert json.load(f)["validation"][metric] == pytest.approx(evaluated[metric], abs=1e-9)


@pytest.mark.slow  # about 20 s or more: fine-tunes a tagger and a span labeler (or reads the shared ones)
def test_predict_tags_words_and_answers_questions(head_run, tmp_path, capsys):
    tagger, reader = head_run("tagging"), head_run("squad")
    capsys.readouterr()
    assert main(["predict", "--model", str(tagger), "--json", "Airbus delivered 735 jets in 2023"]) == 0
    tags = _json_line(capsys.readouterr().out)["tags"]
    names = keras.saving.load_model(tagger / "model.keras").label_names
    assert [t["word"] for t in tags] == ["Airbus", "delivered", "735", "jets", "in", "2023"]
    assert all(t["tag"] in names for t in tags)
    context = "The bridge was designed by Gustave Eiffel and opened in 1889."
    assert (
        main(
            [
                "predict",
                "--model",
                str(reader),
                "--json",
                "--question",
                "Who designed it?",
                "--context",
                context,
            ]
        )
        == 0
    )
    answer = _json_line(capsys.readouterr().out)["answer"]
    assert answer == "" or answer in context
    # A text the readers refuse is named as the user gave it: the file's line, the flag's
    # occurrence (it was "predict:1", with a fix, on_error='skip', that predict has not).
    words = tmp_path / "words.txt"
    words.write_text("\n\nhello \u200b world\n", encoding="utf-8")
    assert main(["predict", "--model", str(tagger), "--file", str(words)]) == 2
    err = capsys.readouterr().err
    assert f"--file {words}:3: the word(s) ['\\u200b'] have no wordpieces" in err and "on_error" not in err, (
        err
    )
    assert (
        main(
            [
                "predict",
                "--model",
                str(reader),
                "--question",
                "Who designed it?",
                "--context",
                context,
                "--question",
                "When?",
                "--context",
                "\u200b",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--question 2: the context has no wordpieces. Fix or leave out that question." in err, err


@pytest.mark.slow  # about 20 s or more: pretrains, then fine-tunes
def test_pretrain_then_finetune_from_it(tmp_path, capsys, data_dir):
    vocab = os.path.join(data_dir, "minilm", "vocab.txt")
    corpus = tmp_path / "reviews.csv"
    # The first two reviews, whole (cut at a line count, the second was a quote left open, which
    # the reviews-csv reader refuses since it parses strictly).
    with open(REVIEWS, encoding="utf-8-sig", newline="") as f:
        reviews = [row for _, row in zip(range(2), csv.reader(f))]
    with open(corpus, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(reviews)
    run = tmp_path / "pretrain"
    argv = [
        "pretrain",
        "--corpus",
        str(corpus),
        "--corpus-format",
        "reviews-csv",
        "--vocab",
        vocab,
        "--preset",
        "bert_tiny",
        "--output",
        str(run),
        "--steps",
        "12",
        "--steps-per-epoch",
        "6",
        "--seq-len",
        "64",
        "--batch-size",
        "8",
        "--dupe-factor",
        "1",
        "--quiet",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "MLM accuracy" in out and "unigram baseline" in out and "NSP accuracy" in out
    # The run folder rules of finetune: the backup goes after success, a re-run changes nothing.
    assert sorted(os.listdir(run)) == ["logs", "metrics.json", "model.keras", "records", "run.json"]
    before = (run / "model.keras").read_bytes()
    assert main(argv) == 0 and "already holds this finished run" in capsys.readouterr().err
    assert (run / "model.keras").read_bytes() == before
    assert main([*argv[:-1], "--steps", "18", "--quiet"]) == 2
    assert "--steps 12 then, 18 now" in capsys.readouterr().err
    with open(run / "metrics.json") as f:
        metrics = json.load(f)
    assert 0 < metrics["unigram_baseline_mlm_accuracy"] < 1
    assert {"mlm_logits_accuracy", "nsp_logits_accuracy"} <= set(metrics["final_epoch"])
    pretrainer = keras.saving.load_model(run / "model.keras")
    assert isinstance(pretrainer, kb.BertPretrainer) and len(pretrainer.backbone.vocabulary) == 30522
    sentiment = os.path.join(FIXTURES, "sentiment_train.csv")
    assert _finetune(str(run), tmp_path / "ft", "classification", sentiment, sentiment) == 0
    # A finished run whose model was deleted is not reported finished.
    os.remove(run / "model.keras")
    assert main(argv) == 2
    assert "holds a finished run whose model.keras is gone: add --overwrite" in capsys.readouterr().err
    # An unfinished run's records damaged: the error names the way back, which works.
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(dict(record, state="running")))  # as a killed run leaves it
    shard = sorted((run / "records").glob("*.tfrecord"))[0]
    with open(shard, "ab") as f:
        f.write(b"x")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"Delete {run / 'records'} and run the same command again" in err, err
    shutil.rmtree(run / "records")
    assert main(argv) == 0
    assert (
        keras.saving.load_model(run / "model.keras").get_weights()[0].shape
        == pretrainer.get_weights()[0].shape
    )


# -- bad input: a clear error before any training starts ----------------------------


def _refused(capsys, argv, *fragments):
    # The tiny model takes 64 positions; other flags at their defaults.
    argv = [*argv, "--seq-len", "32"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, err
    return err


def test_empty_training_file(tiny_init, tmp_path, capsys):
    empty = tmp_path / "train.csv"
    empty.write_text("")
    dev = os.path.join(FIXTURES, "sentiment_train.csv")
    _refused(
        capsys,
        [
            "finetune",
            "--task",
            "classification",
            "--train",
            str(empty),
            "--validation",
            dev,
            "--init",
            tiny_init,
            "--output",
            str(tmp_path / "run"),
        ],
        f"--train {empty} is empty",
    )
    header_only = tmp_path / "header.csv"
    header_only.write_text("text,label\n")
    _refused(
        capsys,
        [
            "finetune",
            "--task",
            "classification",
            "--train",
            str(header_only),
            "--validation",
            dev,
            "--init",
            tiny_init,
            "--output",
            str(tmp_path / "run"),
        ],
        "gave no examples",
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # about 30 s or more: a refusal, then a fine-tune that skips the row
def test_validation_label_unseen_in_training(tiny_init, tmp_path, capsys):
    _refused(
        capsys,
        [
            "finetune",
            "--task",
            "classification",
            "--train",
            os.path.join(FIXTURES, "sentiment_train.csv"),
            "--validation",
            os.path.join(FIXTURES, "sentiment_dev_unknown_label.csv"),
            "--init",
            tiny_init,
            "--output",
            str(tmp_path / "run"),
        ],
        "line 3",
        "unknown label 'negative'",
        "must occur in the training file",
    )
    assert not (tmp_path / "run").exists()
    # --on-error skip: the row is left out, counted and shown.
    assert (
        main(
            [
                "finetune",
                "--task",
                "classification",
                "--train",
                os.path.join(FIXTURES, "sentiment_train.csv"),
                "--validation",
                os.path.join(FIXTURES, "sentiment_dev_unknown_label.csv"),
                "--init",
                tiny_init,
                "--output",
                str(tmp_path / "run"),
                "--on-error",
                "skip",
                *FAST,
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "skipped 1 malformed row(s) (unknown_label 1); the first, line 3: unknown label 'negative'" in err
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["validation"]["num_examples"] == 2


def test_reader_messages_name_the_cli_flags(tiny_init, tmp_path, capsys):
    headed = tmp_path / "headed.csv"
    headed.write_text("sentence,polarity\nfine,pos\nbad,neg\n", encoding="utf-8")
    _refused(
        capsys,
        [
            "finetune",
            "--task",
            "classification",
            "--train",
            str(headed),
            "--validation",
            str(headed),
            "--init",
            tiny_init,
            "--output",
            str(tmp_path / "run"),
        ],
        "--text-column/--label-column naming yours, or --no-header with --columns for a headerless file",
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"text": "fine", "label": "pos"}\n{"text": "bad"\n{"text": "ok", "label": "neg"}\n', encoding="utf-8"
    )
    _refused(
        capsys,
        [
            "finetune",
            "--task",
            "classification",
            "--train",
            str(bad),
            "--validation",
            str(bad),
            "--init",
            tiny_init,
            "--output",
            str(tmp_path / "run"),
        ],
        f"--train {bad}:2",
        "--on-error skip to skip and count such rows",
    )


def test_steps_zero_and_preset_vocab_mismatch(tiny_init, tmp_path, capsys, data_dir):
    vocab = os.path.join(data_dir, "minilm", "vocab.txt")
    _refused(
        capsys,
        [
            "pretrain",
            "--corpus",
            REVIEWS,
            "--vocab",
            vocab,
            "--preset",
            "bert_tiny",
            "--output",
            str(tmp_path / "p"),
            "--steps",
            "0",
        ],
        "--steps must be a positive integer. Received: 0",
    )
    small_vocab = tmp_path / "vocab.txt"
    small_vocab.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]) + "\n"
    )
    _refused(
        capsys,
        [
            "pretrain",
            "--corpus",
            REVIEWS,
            "--vocab",
            str(small_vocab),
            "--init",
            tiny_init,
            "--output",
            str(tmp_path / "p"),
        ],
        "has 100 tokens",
        "vocabulary_size=30522",
    )
    sentiment = os.path.join(FIXTURES, "sentiment_train.csv")
    _refused(
        capsys,
        [
            "finetune",
            "--task",
            "classification",
            "--train",
            sentiment,
            "--validation",
            sentiment,
            "--init",
            tiny_init,
            "--vocab",
            str(small_vocab),
            "--output",
            str(tmp_path / "f"),
        ],
        "has 100 tokens",
        "vocabulary_size=30522",
    )
    assert not (tmp_path / "p").exists() and not (tmp_path / "f").exists()


# Two logical CPU devices must be configured before TensorFlow starts: a fresh process. One
# process runs every command of the mirrored tests (argv lists as JSON in argv[1]) and writes each
# one's exit status and stderr to the JSON file argv[2]: each TensorFlow start costs 8-10 s.
MIRRORED = r"""
import contextlib, io, json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from keras_bert_impl.cli import main
results = {}
for name, argv in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        results[name] = {"returncode": main(argv), "stderr": err.getvalue()}
with open(sys.argv[2], "w") as f:
    json.dump(results, f)
"""


def _mirrored_argv(init, output, *extra):
    sentiment = os.path.join(FIXTURES, "sentiment_train.csv")
    return [
        "finetune",
        "--task",
        "classification",
        "--train",
        sentiment,
        "--validation",
        sentiment,
        "--init",
        init,
        "--output",
        str(output),
        "--strategy",
        "mirrored",
        *extra,
    ]


@pytest.fixture(scope="module")
def mirrored(tiny_init, mr_files, tmp_path_factory):
    """The commands of the three mirrored tests below, run in one child process over two logical
    CPU devices: {"folder", "results": {name: {"returncode", "stderr"}}}. The two refusals come
    after the two trainings, so that they cannot change what the trainings compare."""
    folder = tmp_path_factory.mktemp("mirrored")
    init = save_small_bert(folder, dropout=0.0)  # no dropout: the two runs draw no masks
    train, dev = mr_files
    with open(train, encoding="utf-8", newline="") as f, open(dev, encoding="utf-8", newline="") as g:
        rows = list(csv.reader(f)) + list(csv.reader(g))[:3]  # quoted fields, some with line breaks inside
    with open(folder / "train83.csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    commands = {}
    for strategy in ("one-device", "mirrored"):
        commands[strategy] = [
            "finetune",
            "--task",
            "classification",
            "--init",
            init,
            "--train",
            str(folder / "train83.csv"),
            "--validation",
            dev,
            "--no-header",
            "--columns",
            "label,text",
            "--seq-len",
            "32",
            "--batch-size",
            "8",
            "--epochs",
            "2",
            "--dropout",
            "0",
            "--learning-rate",
            "1e-3",
            "--save-every",
            "3",
            "--quiet",
            "--strategy",
            strategy,
            "--output",
            str(folder / strategy),
        ]
    commands["batch_size_7"] = _mirrored_argv(tiny_init, folder / "batch_size_7", "--batch-size", "7")
    commands["xla"] = _mirrored_argv(tiny_init, folder / "xla", "--batch-size", "8", "--xla")
    return {"folder": folder, "results": run_over_two_cpus(commands, folder / "results.json")}


def run_over_two_cpus(commands, results):
    """{name: {"returncode", "stderr"}} of the `kbert` commands {name: argv}, run in order in one
    child process whose CPU is split into two logical devices (what --strategy mirrored spreads
    over); `results` is the file the child writes them to."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO, KERAS_BACKEND="tensorflow")
    done = subprocess.run(
        [sys.executable, "-c", MIRRORED, json.dumps(commands), str(results)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(results.read_text())


@pytest.mark.slow  # about 30 s: a child process imports TensorFlow and loads the model to refuse
def test_batch_size_not_divisible_by_replicas(mirrored):
    done = mirrored["results"]["batch_size_7"]
    assert done["returncode"] == 2, done["stderr"][-2000:]
    assert (
        "--batch-size 7 does not split over the 2 replicas of --strategy mirrored: use a multiple of 2"
        in done["stderr"]
    )
    assert not (mirrored["folder"] / "batch_size_7").exists()


@pytest.mark.slow  # about 30 s: a child process imports TensorFlow and loads the model to refuse
def test_xla_over_mirrored_cpu_devices_is_refused(mirrored):
    done = mirrored["results"]["xla"]
    assert done["returncode"] == 2, done["stderr"][-2000:]
    assert (
        "--xla with --strategy mirrored over 2 CPU devices" in done["stderr"]
        and "Drop --xla" in done["stderr"]
    )
    assert not (mirrored["folder"] / "xla").exists()


@pytest.mark.slow  # about 60 s: fine-tunes on one device and on two, with a backup every 3 steps
def test_mirrored_finetune_trains_like_one_device(mirrored):
    """`kbert finetune --strategy mirrored` end to end: 83 rows at batch 8 end each epoch on a
    partial batch of 3, which two replicas split 2 and 1 (seed 0 shuffles it to the front);
    the backups, that first batch and its weighting all once broke mirrored training."""
    weights = {}
    for strategy in ("one-device", "mirrored"):
        done = mirrored["results"][strategy]
        assert done["returncode"] == 0, done["stderr"][-3000:]
        assert f"on {1 if strategy == 'one-device' else 2} replica(s)" in done["stderr"]
        path = mirrored["folder"] / strategy / "model.keras"
        weights[strategy] = keras.saving.load_model(str(path)).get_weights()
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(weights["one-device"], weights["mirrored"]))
    print("max weight difference, one device vs mirrored:", gap)
    assert gap < 1e-5


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.slow  # about 20 s or more: trains, interrupts and resumes under mixed precision
def test_mixed_precision_trains_and_resumes(tiny_init, tmp_path, capsys, monkeypatch, precision):
    sentiment = os.path.join(FIXTURES, "sentiment_train.csv")
    argv = [
        "finetune",
        "--task",
        "classification",
        "--train",
        sentiment,
        "--validation",
        sentiment,
        "--init",
        tiny_init,
        "--output",
        str(tmp_path / "run"),
        "--epochs",
        "2",
        "--seq-len",
        "32",
        "--batch-size",
        "2",
        "--precision",
        precision,
        "--save-every",
        "1",
        "--quiet",
    ]
    _interrupted(monkeypatch, lambda: main(argv), 3)
    keras.config.set_dtype_policy("float32")
    capsys.readouterr()
    assert main(argv) == 0  # fp16 adds the loss scale to the optimizer state: it must restore too
    assert "resumed from the backup at step 3 of 4" in capsys.readouterr().err
    keras.config.set_dtype_policy("float32")
    # The model file computes in float32 (the precision it runs at is chosen when it runs): Keras
    # alone loads it so, and an fp16 run's exports (its float16 ops had no TFLite builtins).
    model = keras.saving.load_model(tmp_path / "run" / "model.keras")
    assert computes_in(model) == {"float32"} and all(w.dtype == "float32" for w in model.get_weights())
    assert json.loads((tmp_path / "run" / "run.json").read_text())["settings"]["precision"] == precision
    assert (
        main(
            [
                "export",
                "--model",
                str(tmp_path / "run"),
                "--output",
                str(tmp_path / "export"),
                "--formats",
                "tflite",
                "--quantizations",
                "float32",
                "--seq-len",
                "32",
            ]
        )
        == 0
    )


@pytest.mark.slow  # about 40 s or more: a fine-tune, its quantization-aware training and an export
def test_qat_continues_a_classifier_and_exports_its_integer_file(tiny_run, mr_files, tmp_path, capsys):
    """`kbert finetune --qat` from a finished run keeps its head, writes a QuantizationAwareClassifier
    that evaluates and predicts like any head, and `kbert export --quantizations int8_only` converts it
    with the ranges it learned: no --calibration, every tensor integer (issue 31, item 2). The
    finished float run is `tiny_run`: `_finetune(tiny_init, float_run, "classification", train,
    dev, "--no-header", "--columns", "label,text")`, shared."""
    from keras_bert_impl.conversion.tflite_targets import TfliteTargets

    train, dev = mr_files
    layout = ["--no-header", "--columns", "label,text"]
    float_run, qat_run = pathlib.Path(tiny_run), tmp_path / "qat"
    assert (
        _finetune(
            str(float_run), qat_run, "classification", train, dev, *layout, "--qat", "--learning-rate", "1e-5"
        )
        == 0
    )
    qat = keras.saving.load_model(qat_run / "model.keras")
    start = keras.saving.load_model(float_run / "model.keras")
    assert isinstance(qat, kb.QuantizationAwareClassifier) and qat.ranges.untrained() == []
    assert qat.classifier.label_names == ["-1", "1"] and qat.classifier.pooling == start.pooling
    # The head is the float run's, trained on (not a new random one): close to it at 1e-5 for one epoch.
    assert np.abs(qat.classifier.output_dense.kernel.numpy() - start.output_dense.kernel.numpy()).max() < 1e-3
    with open(qat_run / "metrics.json") as f:
        accuracy = json.load(f)["validation"]["accuracy"]
    assert main(["evaluate", "--model", str(qat_run), "--data", dev, "--json"]) == 0
    assert _json_line(capsys.readouterr().out)["accuracy"] == pytest.approx(accuracy, abs=1e-9)

    assert main(["predict", "--model", str(qat_run), "--json", "a gripping , funny film"]) == 0
    assert json.loads(capsys.readouterr().out.strip())["label"] in ("-1", "1")

    export = tmp_path / "export"
    assert (
        main(
            [
                "export",
                "--model",
                str(qat_run),
                "--output",
                str(export),
                "--formats",
                "tflite",
                "--quantizations",
                "float32,int8_only",
                "--seq-len",
                "32",
            ]
        )
        == 0
    )
    flatbuffer = (export / "tflite" / "bert_int8_only.tflite").read_bytes()
    assert TfliteTargets(flatbuffer).integer_only
    # int16x8_only of a QAT model is its float classifier's, post-training: that one needs --calibration.
    assert (
        main(
            [
                "export",
                "--model",
                str(qat_run),
                "--output",
                str(tmp_path / "e2"),
                "--formats",
                "tflite",
                "--quantizations",
                "int16x8_only",
                "--seq-len",
                "32",
            ]
        )
        == 0
    )  # the run's --train calibrates
    capsys.readouterr()


def test_qat_refusals(tiny_init, mr_files, tmp_path, capsys):
    train, dev = mr_files
    run = str(tmp_path / "run")
    _refused(
        capsys,
        [
            "finetune",
            "--task",
            "tagging",
            "--qat",
            "--train",
            train,
            "--validation",
            dev,
            "--init",
            tiny_init,
            "--output",
            run,
        ],
        "--task tagging cannot be exported integer-only",
    )
    _refused(
        capsys,
        [
            "finetune",
            "--task",
            "classification",
            "--qat",
            "--precision",
            "bf16",
            "--train",
            train,
            "--validation",
            dev,
            "--init",
            tiny_init,
            "--output",
            run,
        ],
        "--qat trains in fp32 (its fake quantization computes in float32). Received: --precision bf16. Drop "
        "--precision (fp32 is the default) or drop --qat.",
    )
    # A classifier of other labels: the QAT file of another task.
    other = tmp_path / "other.keras"
    backbone = keras.saving.load_model(tiny_init)
    kb.BertClassifier(backbone, num_classes=3, label_names=["a", "b", "c"]).save(other)
    _refused(
        capsys,
        [
            "finetune",
            "--task",
            "classification",
            "--qat",
            "--train",
            train,
            "--validation",
            dev,
            "--init",
            str(other),
            "--output",
            run,
            "--no-header",
            "--columns",
            "label,text",
        ],
        "it was trained on labels ['a', 'b', 'c'] and --train",
    )
    assert not os.path.exists(run)
