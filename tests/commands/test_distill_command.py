"""kbert distill end to end on a tiny teacher with the real MiniLM vocabulary and real MR
sentences (labelled rows) and full-review sentences (the unlabeled transfer set): the run
folder other commands take, resume after SIGKILL with the weights of an uninterrupted run,
and every bad input of the distillation issue refused before training starts."""

import contextlib
import csv
import io
import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from tests.commands.conftest import save_small_bert

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MR = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee2.csv")
REVIEWS = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee1.csv")
LAYOUT = ["--no-header", "--columns", "label,text"]
FAST = ["--seq-len", "32", "--batch-size", "8", "--quiet"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """120 MR rows to train on, 40 to validate, 300 full-review sentences as unlabeled text."""
    if not os.path.isfile(MR):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    with open(MR, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    pos, neg = [r for r in rows if r[0] == "1"], [r for r in rows if r[0] == "-1"]
    folder = tmp_path_factory.mktemp("distill_data")
    paths = {"train": folder / "train.csv", "dev": folder / "dev.csv", "unlabeled": folder / "reviews.txt"}
    for key, part in (("train", pos[:60] + neg[:60]), ("dev", pos[60:80] + neg[60:80])):
        with open(paths[key], "w", encoding="utf-8", newline="") as f:
            csv.writer(f, quoting=csv.QUOTE_ALL).writerows(part)
    sentences = []
    with open(REVIEWS, encoding="utf-8-sig", newline="") as f:
        for _, review in csv.reader(f):
            sentences += [line.strip() for line in review.split("\n") if line.strip()]
            if len(sentences) >= 300:
                break
    paths["unlabeled"].write_text("\n".join(sentences[:300]) + "\n\n", encoding="utf-8")  # a blank line too
    return {key: str(path) for key, path in paths.items()}


@pytest.fixture(scope="module")
def teacher(tmp_path_factory, files):
    """A `kbert finetune` run (one epoch) of a 2-layer, 128-wide BERT (real vocabulary) on the MR rows."""
    init = save_small_bert(
        tmp_path_factory.mktemp("init"), num_layers=2, hidden_dim=128, intermediate_dim=256
    )
    run = str(tmp_path_factory.mktemp("teacher") / "run")
    assert (
        main(
            [
                "finetune",
                "--task",
                "classification",
                "--init",
                init,
                "--train",
                files["train"],
                "--validation",
                files["dev"],
                "--output",
                run,
                "--epochs",
                "1",
                "--learning-rate",
                "1e-3",
                *LAYOUT,
                *FAST,
            ]
        )
        == 0
    )
    return run


def _distill(teacher, files, output, *extra):
    return [
        "distill",
        "--teacher",
        teacher,
        "--train",
        files["train"],
        "--validation",
        files["dev"],
        "--output",
        str(output),
        "--epochs",
        "1",
        *FAST,
        *extra,
    ]


def _captured(argv):
    """`kbert argv` run in this process for a module fixture (capsys is per test): (status, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def transfer_run(teacher, files, tmp_path_factory):
    """A bert_tiny student distilled on the labelled rows and the unlabeled texts with intermediate
    layer transfer, read by the run-folder test and the layer-transfer test (each trained a run of
    its own, alike but for the flags the other does not check): (run folder, stdout, stderr)."""
    run = tmp_path_factory.mktemp("transfer") / "student"
    transfer = ["--layer-map", "uniform", "--hidden-weight", "1", "--attention-weight", "1"]
    argv = _distill(teacher, files, run, "--student-preset", "bert_tiny", "--unlabeled", files["unlabeled"])
    argv += ["--alpha", "0.3", "--temperature", "3", *transfer, "--embedding-weight", "0.5"]
    status, out, err = _captured(argv)
    assert status == 0, err[-3000:]
    return run, out, err


@pytest.fixture(scope="module")
def qat_teacher_run(teacher, files, tmp_path_factory):
    """A one-layer student taken from layer 1 of a quantization-aware copy of the teacher, read by
    the from-teacher-layers test and the QAT test (each trained a run of its own, alike but for
    the teacher's QAT wrapper, which is unwrapped to the same float classifier before the
    student is built): (run folder, stderr)."""
    folder = tmp_path_factory.mktemp("qat_teacher")
    float_teacher = keras.saving.load_model(os.path.join(teacher, "model.keras"))
    qat = folder / "qat.keras"
    kb.QuantizationAwareClassifier(float_teacher).save(qat)
    run = folder / "student"
    argv = _distill(str(qat), files, run, "--student-from-teacher", "1", "--alpha", "0", *LAYOUT)
    status, _, err = _captured(argv)
    assert status == 0, err[-3000:]
    return run, err


@pytest.mark.slow  # about 20 s or more: evaluates and predicts through the CLI (and `transfer_run`)
def test_distill_writes_a_run_folder_that_evaluate_and_predict_take(transfer_run, teacher, files, capsys):
    run, out, err = transfer_run
    assert "120 labelled + 300 unlabeled examples (1 blank lines skipped)" in err
    assert "embeddings from the teacher's by PCA" in err
    assert "% of the teacher" in out
    student = keras.saving.load_model(run / "model.keras")
    teacher_model = keras.saving.load_model(os.path.join(teacher, "model.keras"))
    assert isinstance(student, kb.BertClassifier) and student.backbone.hidden_dim == 128
    assert student.label_names == teacher_model.label_names
    assert student.backbone.vocabulary == teacher_model.backbone.vocabulary
    # One epoch: the final model is the best one, kept once; the backup is gone after success.
    assert json.loads((run / "metrics.json").read_text())["best"]["file"] == "model.keras"
    assert sorted(os.listdir(run)) == ["logs", "metrics.json", "model.keras", "run.json", "task.json"]
    assert main(["evaluate", "--model", str(run), "--data", files["dev"], "--json"]) == 0
    assert '"examples": 40' in capsys.readouterr().out
    assert main(["predict", "--model", str(run), "a warm , funny film"]) == 0
    predicted = capsys.readouterr().out.split("\t")[0]
    assert predicted in teacher_model.label_names, predicted


@pytest.mark.slow  # about 20 s or more: reads `qat_teacher_run` (and `teacher`), trained for it
def test_student_from_teacher_layers_starts_as_those_layers(qat_teacher_run):
    run, err = qat_teacher_run
    assert "teacher layers [1]" in err
    student = keras.saving.load_model(run / "model.keras")
    assert student.backbone.num_layers == 1 and student.backbone.hidden_dim == 128


@pytest.mark.slow  # about 20 s or more: a distillation run from a quantization-aware teacher
def test_a_quantization_aware_teacher_is_distilled_through_its_float_classifier(teacher, qat_teacher_run):
    # It used to end in a traceback: the student head was built as a QuantizationAwareClassifier of a
    # backbone.
    float_teacher = keras.saving.load_model(os.path.join(teacher, "model.keras"))
    run, err = qat_teacher_run
    assert "is quantization-aware: distilling from the float classifier it wraps" in err
    student = keras.saving.load_model(run / "model.keras")
    assert type(student) is kb.BertClassifier and student.label_names == float_teacher.label_names


def _weights(path):
    return keras.saving.load_model(path).get_weights()


@pytest.mark.slow  # about 20 s or more: three distillation processes: uninterrupted, killed, resumed
def test_sigkill_then_the_same_command_resumes_to_the_uninterrupted_weights(teacher, files, tmp_path):
    # 15 steps an epoch, a backup every 5: the kill lands in the first epoch and the resumed
    # run crosses an epoch boundary (where a tf.data reshuffle would not repeat itself).
    argv = _distill(
        teacher, files, "OUT", "--student-preset", "bert_tiny", "--epochs", "2", "--save-every", "5"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)

    def command(output):
        return [
            sys.executable,
            "-m",
            "keras_bert_impl.cli",
            *[str(output) if a == "OUT" else a for a in argv],
        ]

    reference, killed = tmp_path / "reference", tmp_path / "killed"
    done = subprocess.run(command(reference), capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    process = subprocess.Popen(command(killed), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    state = killed / "backup" / "training_state.npz"
    deadline = time.monotonic() + 300
    while not state.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, (
        "the run ended before the kill: " + process.stderr.read().decode()[-2000:]
    )
    assert not (killed / "model.keras").exists()

    resumed = subprocess.run(command(killed), capture_output=True, text=True, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from the backup at step" in resumed.stderr
    for a, b in zip(_weights(reference / "model.keras"), _weights(killed / "model.keras")):
        np.testing.assert_array_equal(a, b)
    # That was with length-bucketed batches, distill's default.
    assert json.loads((killed / "task.json").read_text())["length_buckets"] is True


def _refused(capsys, argv, *fragments):
    assert main(argv) == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, err
    assert "Traceback" not in err


@pytest.mark.slow  # about 20 s or more: one distill command per bad input, after the teacher's fine-tune
def test_bad_input_is_refused_before_training(teacher, files, tmp_path, capsys):
    out = tmp_path / "never"
    tiny = ("--student-preset", "bert_tiny")
    _refused(
        capsys,
        _distill(teacher, files, out, *tiny, "--temperature", "0"),
        "--temperature 0.0: temperature must be a finite number > 0",
        "Received: temperature=0.0",
    )
    _refused(
        capsys,
        _distill(teacher, files, out, *tiny, "--alpha", "1.5"),
        "--alpha 1.5: alpha must be a number in [0, 1]",
        "Received: alpha=1.5",
    )
    _refused(
        capsys,
        _distill(teacher, files, out, "--student-from-teacher", "0,2"),
        "--student-from-teacher 0,2",
        "distinct layer indices in [0, 1]",
        "[0, 2]",
    )
    _refused(
        capsys,
        _distill(teacher, files, out, "--student-from-teacher", "zero"),
        "comma-separated layer indices",
    )
    _refused(capsys, _distill(teacher, files, out, "--student-from-teacher", "1,0"), "in increasing order")
    # Dropped without a word before: only a preset's embeddings are shaped by it.
    _refused(
        capsys,
        _distill(teacher, files, out, "--student-from-teacher", "1", "--student-embeddings", "random"),
        "--student-embeddings random shapes a --student-preset's embeddings",
    )
    _refused(
        capsys, _distill(teacher, files, out, "--student-preset", "bert_huge"), "'bert_huge' is not a preset"
    )
    _refused(
        capsys,
        _distill(teacher, files, out, "--student-preset", "bert_mini"),
        "wider (hidden_dim 256) than the teacher (128)",
        "--student-embeddings random",
    )
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    _refused(
        capsys, _distill(teacher, files, out, *tiny, "--unlabeled", str(empty)), "--unlabeled", "is empty"
    )
    # The teacher's vocabulary is the student's by construction (a differing one is the
    # Distiller's refusal, tests/models/test_distiller.py). A training file of another task
    # than the teacher's: multi-label JSON rows for a single-label classifier.
    topics = os.path.join(REPO, "tests", "fixtures", "readers", "topics_train.jsonl")
    _refused(
        capsys,
        [
            "distill",
            "--teacher",
            teacher,
            "--train",
            topics,
            "--validation",
            files["dev"],
            "--output",
            str(out),
            *tiny,
            "--format",
            "jsonl",
        ],
        "--train",
        "topics_train.jsonl",
    )
    assert not out.exists()


@pytest.mark.slow  # about 20 s or more: reads `transfer_run` (and `teacher`), trained for it
def test_intermediate_layer_transfer_trains_and_is_recorded(transfer_run):
    run = transfer_run[0]
    metrics = json.loads((run / "metrics.json").read_text())
    for term in ("hidden_loss", "attention_loss", "embedding_loss"):
        assert np.isfinite(metrics["history"][term][0]) and term in metrics["history"], metrics["history"]
        assert "val_" + term in metrics["history"]
    task = json.loads((run / "task.json").read_text())
    assert (task["layer_map"], task["hidden_weight"], task["attention_weight"], task["embedding_weight"]) == (
        [1, 2],
        1.0,
        1.0,
        0.5,
    )
    # The saved student is a plain student: the same weights as one without transfer would hold.
    student = keras.saving.load_model(run / "model.keras")
    assert isinstance(student, kb.BertClassifier) and student.backbone.num_layers == 2
    assert len(student.weights) == len(
        kb.BertClassifier(
            kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=30522, max_sequence_length=64),
            num_classes=2,
        ).weights
    )


@pytest.mark.slow  # about 20 s or more: one distill command per bad flag
def test_bad_transfer_flags_are_one_line_before_training(teacher, files, tmp_path, capsys):
    out = tmp_path / "never"
    tiny = ("--student-preset", "bert_tiny")

    def refused(extra, *fragments, progress=False):
        assert main(_distill(teacher, files, out, *extra)) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err, err
        # The flag checks answer before anything is read; the model checks after the
        # command's progress lines, the error one line still.
        lines = err.strip().splitlines()
        assert (len(lines) > 1) == progress and lines[-1].startswith("kbert distill: --"), err
        for fragment in fragments:
            assert fragment in lines[-1], err

    refused(
        (*tiny, "--layer-map", "uniform", "--hidden-weight", "-1"),
        "--hidden-weight -1.0: hidden_weight must be a number >= 0",
        "Received: hidden_weight=-1.0",
    )
    refused(
        (*tiny, "--embedding-weight", "nan"),
        "--embedding-weight nan: embedding_weight must be a number >= 0",
        "Received: embedding_weight=nan",
    )
    refused(
        (*tiny, "--layer-map", "0,2", "--hidden-weight", "1"),
        "--layer-map takes uniform or comma-separated",
        "Received: '0,2'",
    )
    refused((*tiny, "--layer-map", "every", "--hidden-weight", "1"), "Received: 'every'")
    refused(
        (*tiny, "--hidden-weight", "1"),
        "--layer-map (not given): hidden_weight=1.0 and attention_weight=0.0 compare mapped layers: "
        "pass layer_map",
    )
    refused(
        (*tiny, "--layer-map", "uniform"),
        "--layer-map uniform: layer_map='uniform' maps layers for hidden_weight and attention_weight, "
        "which are both 0",
    )
    # Checked against the two models once they are built, still before training.
    refused(
        (*tiny, "--layer-map", "1,2,3", "--hidden-weight", "1"),
        "--layer-map 1,2,3 for a 2-layer student of a 2-layer teacher",
        "one teacher layer per student layer (2). Received 3",
        progress=True,
    )
    refused(
        (*tiny, "--layer-map", "1,3", "--hidden-weight", "1"),
        "layer_map[1] must be a teacher layer in [1, 2]",
        "Received: layer_map[1]=3",
        progress=True,
    )
    refused(
        (
            "--student-preset",
            "bert_mini",
            "--student-embeddings",
            "random",
            "--layer-map",
            "1,1,2,2",
            "--attention-weight",
            "1",
        ),
        "--attention-weight 1.0 for a 4-layer student of a 2-layer teacher",
        "the teacher has 2 heads and the student 4. Pass attention_weight=0",
        progress=True,
    )
    assert not out.exists()


# --- general (task-agnostic) distillation ----------------------------------------------------


@pytest.mark.slow  # about 20 s or more: general, then task distillation
def test_general_distillation_writes_a_student_encoder_that_task_distillation_starts_from(
    teacher, files, tmp_path, capsys
):
    general = tmp_path / "general"
    held_out = tmp_path / "held_out.txt"
    held_out.write_text("\n".join(open(files["unlabeled"], encoding="utf-8").read().split("\n")[:40]) + "\n")
    assert (
        main(
            [
                "distill",
                "--general",
                "--teacher",
                teacher,
                "--student-preset",
                "bert_tiny",
                "--unlabeled",
                files["unlabeled"],
                "--validation",
                str(held_out),
                "--embedding-weight",
                "1",
                "--output",
                str(general),
                "--epochs",
                "2",
                *FAST,
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "300 texts (1 blank lines skipped)" in captured.err and "layer map [1, 2]" in captured.err, (
        captured.err
    )
    encoder = keras.saving.load_model(general / "model.keras")
    teacher_model = keras.saving.load_model(os.path.join(teacher, "model.keras"))
    assert type(encoder) is kb.BertBackbone and (encoder.num_layers, encoder.hidden_dim) == (2, 128)
    assert encoder.pooler.trainable  # frozen while no term read it, trainable for whoever fine-tunes it
    assert encoder.vocabulary == teacher_model.backbone.vocabulary
    metrics = json.loads((general / "metrics.json").read_text())
    history = metrics["history"]
    for term in ("hidden_loss", "embedding_loss"):
        assert history[term][1] < history[term][0], history
        assert np.isfinite(history["val_" + term]).all(), history
    assert (metrics["general"], metrics["layer_map"], metrics["hidden_weight"], metrics["seq_len"]) == (
        True,
        [1, 2],
        1.0,
        32,
    )
    assert sorted(os.listdir(general)) == ["logs", "metrics.json", "model.keras", "run.json"]
    # The same command again leaves the finished run as it is.
    assert (
        main(
            [
                "distill",
                "--general",
                "--teacher",
                teacher,
                "--student-preset",
                "bert_tiny",
                "--unlabeled",
                files["unlabeled"],
                "--validation",
                str(held_out),
                "--embedding-weight",
                "1",
                "--output",
                str(general),
                "--epochs",
                "2",
                *FAST,
            ]
        )
        == 0
    )
    assert "finished" in capsys.readouterr().err

    # The task distillation's student starts as that encoder.
    run = tmp_path / "task"
    assert main(_distill(teacher, files, run, "--student-init", str(general), "--alpha", "0")) == 0
    assert str(general) in capsys.readouterr().err
    student = keras.saving.load_model(run / "model.keras")
    assert (student.backbone.num_layers, student.backbone.hidden_dim) == (2, 128)
    assert json.loads((run / "task.json").read_text())["learning_rate"] == 2e-4


@pytest.mark.slow  # about 20 s or more: one distill command per bad input
def test_general_distillation_bad_input_is_refused_before_training(teacher, files, tmp_path, capsys):
    out = tmp_path / "never"
    general = [
        "distill",
        "--general",
        "--teacher",
        teacher,
        "--student-preset",
        "bert_tiny",
        "--output",
        str(out),
        *FAST,
    ]
    _refused(capsys, general, "--general distils on unlabeled text: pass --unlabeled FILE")
    with_text = [*general, "--unlabeled", files["unlabeled"]]
    _refused(capsys, [*with_text, "--train", files["train"]], "--train has no effect")
    _refused(
        capsys,
        [*with_text, "--alpha", "0.5", "--temperature", "2"],
        "--temperature and --alpha have no effect",
        "drop them",
    )
    _refused(
        capsys,
        [*with_text, "--hidden-weight", "0"],
        "--hidden-weight 0.0: General distillation learns from "
        "the teacher's layers only: give hidden_weight, attention_weight or embedding_weight a value > 0. "
        "Received: all 0",
    )
    _refused(
        capsys,
        [*with_text, "--layer-map", "1,3"],
        "--layer-map 1,3",
        "layer_map[1] must be a teacher layer in [1, 2]",
    )
    _refused(
        capsys,
        [
            *with_text,
            "--attention-weight",
            "1",
            "--student-preset",
            "bert_mini",
            "--layer-map",
            "1,1,2,2",
            "--student-embeddings",
            "random",
        ],
        "--attention-weight 1.0",
        "teacher has 2 heads and the student 4",
    )
    # Task distillation still needs its labelled files.
    _refused(
        capsys,
        ["distill", "--teacher", teacher, "--student-preset", "bert_tiny", "--output", str(out)],
        "--train is required",
        "except with --general",
    )
    # A student encoder whose vocabulary is not the teacher's.
    vocabulary = list(keras.saving.load_model(os.path.join(teacher, "model.keras")).backbone.vocabulary)
    vocabulary[1000], vocabulary[1001] = vocabulary[1001], vocabulary[1000]
    other = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=len(vocabulary), max_sequence_length=64)
    other.set_vocabulary(vocabulary, lowercase=True)
    other.save(tmp_path / "other.keras")
    _refused(
        capsys,
        _distill(teacher, files, out, "--student-init", str(tmp_path / "other.keras")),
        "--student-init",
        "another vocabulary than the teacher",
    )
    assert not out.exists()
