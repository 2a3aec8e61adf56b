"""Issue 17's one error path, through the real `kbert` entry point in a subprocess where the
process matters (tracebacks, signals, stdin): every expected failure is one line on stderr
with exit status 2, nothing half-written; --debug shows the traceback; Ctrl-C says what was
saved; `predict` keeps one output line per input line."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from keras_bert_impl.cli import main
from tests.commands.model_loads import load_each_file_once

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYOUT = ["--no-header", "--columns", "label,text"]


def _user_env(**extra):
    """A user's environment: without the test suite's TF_CPP_MIN_LOG_LEVEL, so the package's
    own default (no CUDA lines on a CPU machine) is what the user gets."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return dict(env, PYTHONPATH=REPO, **extra)


def _kbert(*argv, stdin=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "keras_bert_impl.cli", *map(str, argv)],
        input=stdin,
        capture_output=True,
        text=True,
        env=_user_env(**(env or {})),
        timeout=300,
    )


def _one_line_failure(done, *fragments):
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def run(tiny_run):
    """A finished classification run of the tiny model on 80 MR rows (tests/commands/conftest.py)."""
    return pathlib.Path(tiny_run)


@pytest.fixture(scope="module")
def _models():
    return {}


@pytest.fixture
def one_load(_models, monkeypatch):
    """The in-process tests below only read `run`'s model (predict and evaluate, never finetune
    --init): its file is loaded once for them all (tests/commands/model_loads.py), not by each of
    their 18 commands."""
    load_each_file_once(monkeypatch, _models)


@pytest.mark.slow  # about 20 s or more: one kbert process per damaged or foreign file
def test_corrupt_or_foreign_model_files_are_one_line_and_debug_shows_the_traceback(run, tmp_path):
    truncated = tmp_path / "truncated.keras"
    truncated.write_bytes((run / "model.keras").read_bytes()[:5000])
    text = tmp_path / "notes.keras"
    text.write_text("not a model\n")
    for path in (truncated, text):
        _one_line_failure(
            _kbert("predict", "--model", path, "a fine film"), f"--model {path} is not a .keras model"
        )
    done = _kbert("evaluate", "--model", truncated, "--data", tmp_path / "missing.csv")
    _one_line_failure(done, "--data", "no such file")
    debug = _kbert("--debug", "predict", "--model", truncated, "a fine film")
    assert debug.returncode != 0 and "Traceback" in debug.stderr
    assert "Traceback" in _kbert("predict", "--model", truncated, "x", env={"KBERT_DEBUG": "1"}).stderr


@pytest.mark.slow  # about 20 s or more: fine-tunes, then predicts through kbert processes
def test_predict_keeps_one_output_line_per_input_line_and_reads_stdin(run, tmp_path):
    lines = ["a gripping , funny film", "", "dull and slow", "   ", "the best film of the year"]
    stdin = "\n".join(lines) + "\n"
    plain = _kbert("predict", "--model", run, "--file", "-", stdin=stdin)
    assert plain.returncode == 0, plain.stderr[-3000:]
    out = plain.stdout.split("\n")[:-1]
    assert len(out) == len(lines)
    for given, shown in zip(lines, out):
        fields = shown.split("\t")
        if given.strip():
            assert fields[0] in ("-1", "1") and 0.5 <= float(fields[1]) <= 1 and fields[2] == given
        else:
            assert fields == ["", "", ""]
    path = tmp_path / "texts.txt"
    path.write_text(stdin, encoding="utf-8")
    assert main(["predict", "--model", str(run), "--file", str(path), "--json"]) == 0


def test_predict_json_results_for_blank_lines(run, one_load, tmp_path, capsys):
    path = tmp_path / "texts.txt"
    path.write_text("\ufeffa warm , funny film\n\nflat\n", encoding="utf-8")
    assert main(["predict", "--model", str(run), "--file", str(path), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().split("\n")]
    assert [r["text"] for r in rows] == ["a warm , funny film", "", "flat"]
    assert rows[1]["label"] is None and rows[1]["probability"] is None
    assert rows[0]["label"] in ("-1", "1") and rows[2]["label"] in ("-1", "1")


def test_inference_flags_that_cannot_work_are_refused(run, one_load, mr_files, tmp_path, capsys):
    _, dev = mr_files
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("fine\ncaf\xe9 cr\xe8me\n".encode("latin-1"))
    refusals = [
        (["predict", "--model", str(run), "--file", str(bad)], f"--file {bad}:2 is not valid UTF-8"),
        (["predict", "--model", str(run), "--seq-len", "2", "a film"], "--seq-len 2 is outside 3..64"),
        (["predict", "--model", str(run), "--seq-len", "65", "a film"], "--seq-len 65 is outside 3..64"),
        (
            ["evaluate", "--model", str(run), "--data", dev, "--seq-len", "1000"],
            "--seq-len 1000 is outside 3..64",
        ),
        (["predict", "--model", str(run), "a film", "--text-b", "another"], "fine-tuned on single texts"),
    ]
    for argv, message in refusals:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_predict_reads_every_kind_of_line_end_and_refuses_what_is_not_text(run, one_load, tmp_path, capsys):
    """Lone \\r line ends were read as one text (one prediction for three inputs); a byte the
    shell could not decode, or a lone surrogate escape, ended in a traceback."""
    old_mac = tmp_path / "old_mac.txt"
    old_mac.write_bytes(b"a warm , funny film\rdull\r\rflat\r")
    assert main(["predict", "--model", str(run), "--file", str(old_mac), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().split("\n")]
    assert [r["text"] for r in rows] == ["a warm , funny film", "dull", "", "flat"]
    # A pipe (--file <(command)) is a file too; a folder is not.
    read_end, write_end = os.pipe()
    os.write(write_end, b"a warm , funny film\n")
    os.close(write_end)
    try:
        assert main(["predict", "--model", str(run), "--file", f"/dev/fd/{read_end}"]) == 0
    finally:
        os.close(read_end)
    assert capsys.readouterr().out.count("\n") == 1
    refusals = [
        (
            ["a film", "caf\udce9"],
            "TEXT 2 holds the byte 0xe9 at character 3, which is not UTF-8 (the shell passed "
            "bytes its locale could not decode): pass the text as UTF-8.",
        ),
        (["--file", str(tmp_path)], f"--file {str(tmp_path)!r} is a folder: give a text file."),
        (["--threshold", "50", "a film"], "--threshold is a probability: a number in [0, 1]. Received: 50.0"),
        (["--threshold", "nan", "a film"], "Received: nan"),
    ]
    for argv, message in refusals:
        assert main(["predict", "--model", str(run), *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_seq_len_zero_or_negative_is_refused_not_read_as_the_default(run, one_load, mr_files, capsys):
    """`--seq-len 0` once ran at the run's length without a word (`args.seq_len or ...`) while
    100000 was refused: every length outside 3..max is one refusal naming the flag, the value
    and the range. (kbert export's are in tests/export/test_export.py.)"""
    _, dev = mr_files
    for value in ("0", "-1", "100000"):
        for argv in (
            ["predict", "--model", str(run), "--seq-len", value, "a film"],
            ["evaluate", "--model", str(run), "--data", dev, "--seq-len", value],
        ):
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert f"--seq-len {value} is outside 3..64" in err and "Pass --seq-len from 3 to 64." in err, err
            assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "command, flags, message",
    [
        (
            "finetune",
            ["--learning-rate", "inf"],
            "--learning-rate must be a finite number > 0. Received: inf",
        ),
        (
            "finetune",
            ["--learning-rate", "nan"],
            "--learning-rate must be a finite number > 0. Received: nan",
        ),
        ("finetune", ["--weight-decay", "nan"], "--weight-decay must be a finite number >= 0. Received: nan"),
        ("pretrain", ["--weight-decay", "inf"], "--weight-decay must be a finite number >= 0. Received: inf"),
        ("finetune", ["--seed", "-1"], "--seed must be in 0..4294967295. Received: -1"),
        ("pretrain", ["--seed", "4294967296"], "--seed must be in 0..4294967295. Received: 4294967296"),
        ("pretrain", ["--steps-per-epoch", "0"], "--steps-per-epoch must be a positive integer. Received: 0"),
        (
            "pretrain",
            ["--validation-steps", "0"],
            "--validation-steps must be a positive integer. Received: 0",
        ),
        (
            "pretrain",
            ["--validation-steps", "-1"],
            "--validation-steps must be a positive integer. Received: -1",
        ),
    ],
)
def test_training_numbers_that_cannot_train_are_refused_before_the_run(
    command, flags, message, tiny_init, mr_files, tmp_path, capsys
):
    # NaN/inf rates trained an all-NaN model and exited 0; a negative seed blamed --train or was a
    # traceback; --validation-steps 0 failed after the first epoch's training, -1 read everything.
    train, dev = mr_files
    output = tmp_path / "run"
    if command == "finetune":
        argv = [
            "finetune",
            "--task",
            "classification",
            "--init",
            tiny_init,
            "--train",
            train,
            "--validation",
            dev,
            *LAYOUT,
        ]
    else:
        argv = [
            "pretrain",
            "--corpus",
            train,
            "--vocab",
            os.path.join(REPO, "data", "minilm", "vocab.txt"),
            "--preset",
            "bert_tiny",
            "--steps",
            "12",
        ]
    assert main([*argv, "--output", str(output), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not output.exists()


def test_a_run_whose_loss_diverges_ends_with_one_line_and_no_model(tiny_init, mr_files, tmp_path, capsys):
    # It was saved as a finished run's model.keras, every weight NaN, exit 0.
    train, dev = mr_files
    run = tmp_path / "run"
    argv = [
        "finetune",
        "--task",
        "classification",
        "--init",
        tiny_init,
        "--train",
        train,
        "--validation",
        dev,
        *LAYOUT,
        "--output",
        str(run),
        "--learning-rate",
        "1e30",
        "--epochs",
        "1",
        "--batch-size",
        "8",
        "--seq-len",
        "32",
        "--quiet",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        "The training loss became" in err[-1]
        and "the weights diverged, and no model was saved from them. Lower "
        "--learning-rate, then run again with --overwrite"
        in err[-1]
    ), err
    assert not (run / "model.keras").exists() and not (run / "metrics.json").exists()


@pytest.mark.slow  # about 20 s or more: trains, interrupts and resumes through kbert processes
def test_ctrl_c_during_training_says_what_was_saved_and_the_same_command_resumes(
    tiny_init, mr_files, tmp_path
):
    train, dev = mr_files
    output = tmp_path / "run"
    argv = [
        "finetune",
        "--task",
        "classification",
        "--train",
        train,
        "--validation",
        dev,
        "--init",
        tiny_init,
        "--output",
        output,
        "--epochs",
        "20",
        "--seq-len",
        "32",
        "--batch-size",
        "8",
        "--save-every",
        "2",
        "--quiet",
        *LAYOUT,
    ]
    # 20 epochs of 10 steps: the run is still training when the first backup appears and Ctrl-C
    # follows. The child gets a terminal's default SIGINT action: a test suite started in the
    # background of a non-interactive shell (`make test &`) runs with SIGINT ignored, which
    # children inherit, and Python then installs no KeyboardInterrupt handler (the run ignored
    # the signal and finished with status 0 in two such fresh-clone checks).
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_bert_impl.cli", *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_user_env(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    state = output / "backup" / "training_state.npz"
    deadline = time.monotonic() + 300
    while not state.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last == (
        f"kbert finetune: interrupted. The training state of the last backup is in {output / 'backup'}: "
        "run the same command again to resume from there."
    ), last
    assert not (output / "model.keras").exists()
    resumed = _kbert(*argv)
    assert resumed.returncode == 0 and "resumed from the backup at step" in resumed.stderr, resumed.stderr[
        -3000:
    ]


@pytest.mark.slow  # about 20 s or more: kbert processes on a truncated checkpoint
def test_truncated_safetensors_is_one_line_for_convert_and_finetune(mr_files, tmp_path):
    source = tmp_path / "truncated_minilm"
    source.mkdir()
    for name in ("config.json", "vocab.txt"):
        (source / name).write_bytes((open(os.path.join(REPO, "data", "minilm", name), "rb")).read())
    with open(os.path.join(REPO, "data", "minilm", "model.safetensors"), "rb") as f:
        (source / "model.safetensors").write_bytes(f.read(1_000_000))
    message = f"{source / 'model.safetensors'} is not a complete safetensors file"
    _one_line_failure(
        _kbert("convert", source, "--format", "huggingface", "--output", tmp_path / "m.keras"), message
    )
    assert not (tmp_path / "m.keras").exists()
    train, dev = mr_files
    _one_line_failure(
        _kbert(
            "finetune",
            "--task",
            "classification",
            "--train",
            train,
            "--validation",
            dev,
            "--init",
            source,
            "--output",
            tmp_path / "run",
            *LAYOUT,
        ),
        f"--init {source}",
        message,
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # about 20 s or more: one kbert process per flag error
def test_help_and_flag_errors_answer_without_importing_tensorflow(run):
    """Issue 19: `kbert --help`, `kbert CMD --help` and a flag error come from argparse alone;
    TensorFlow (seconds to import) is imported only when a command runs."""
    script = os.path.join(os.path.dirname(sys.executable), "kbert")  # the installed console script
    for argv, status in (
        (["--help"], 0),
        (["finetune", "--help"], 0),
        (["predict", "--model"], 2),
        (["finetune", "--task", "nope"], 2),
    ):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", script, *argv],
            capture_output=True,
            text=True,
            env=_user_env(),
            timeout=120,
        )
        assert done.returncode == status, (argv, done.stderr[-2000:])
        imported = [
            line.split("|")[-1].strip()
            for line in done.stderr.splitlines()
            if line.startswith("import time:")
        ]
        assert "keras_bert_impl.cli" in imported
        heavy = [m for m in imported if m.split(".")[0] in ("tensorflow", "keras", "tensorflow_text")]
        assert heavy == [], (argv, heavy[:5])
    # A command runs through the same script: cli.main registers the models before loading one.
    done = subprocess.run(
        [script, "predict", "--model", str(run), "a warm , funny film"],
        capture_output=True,
        text=True,
        env=_user_env(),
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.split("\t")[0] in ("-1", "1"), done.stderr[-2000:]


@pytest.mark.slow  # about 20 s or more: one kbert process per refusal
def test_more_refusals_through_the_entry_point(run, tiny_init, mr_files, tmp_path):
    """The classes of failure tested in-process elsewhere, once each as a user meets them:
    status 2, one line on stderr, nothing written."""
    train, dev = mr_files
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("fine\ncaf\xe9\n".encode("latin-1"))
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    one_class = tmp_path / "one.csv"
    one_class.write_text("".join(f'"1","good film {i}"\n' for i in range(12)), encoding="utf-8")
    headed = tmp_path / "headed.csv"
    headed.write_text("sentence,polarity\nfine,pos\nbad,neg\n", encoding="utf-8")
    finetune = ["finetune", "--task", "classification", "--init", tiny_init, "--seq-len", "32"]
    cases = [
        (["predict", "--model", run, "--file", latin1], [f"--file {latin1}:2 is not valid UTF-8"]),
        (
            [*finetune, "--train", train, "--validation", dev, "--output", a_file, *LAYOUT],
            ["is a file, not a folder"],
        ),
        (["predict", "--model", run, "--seq-len", "2", "a film"], ["--seq-len 2 is outside 3..64"]),
        (
            [*finetune, "--train", one_class, "--validation", dev, "--output", tmp_path / "a", *LAYOUT],
            [f"--train {one_class} has one label only"],
        ),
        (
            [*finetune, "--train", headed, "--validation", headed, "--output", tmp_path / "b"],
            ["--text-column/--label-column", "--no-header with --columns"],
        ),
    ]
    for argv, fragments in cases:
        _one_line_failure(_kbert(*argv), *fragments)
    assert a_file.read_text() == "mine\n" and not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
