"""SIGTERM (`kill`, systemd, a container's stop) takes Ctrl-C's path in every long command:
killed inside its longest step, the command removes its temporary folders, says what was
kept in one line and exits 2 as after Ctrl-C; a training run keeps its backup to resume from.
Each command runs in a subprocess whose TMPDIR is the test's, and is killed once a marker of
that step appears (a file, or a line on stderr), not after a blind sleep."""

import csv
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from keras_bert_impl import cli
from keras_bert_impl.commands.errors import Terminated

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "data")
REVIEWS = os.path.join(DATA, "corpora", "polarity-en-pang&lee1.csv")
MR = os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv")
LAYOUT = ["--no-header", "--columns", "label,text"]
FAST = ["--seq-len", "32", "--batch-size", "8", "--quiet"]


def _terminated(argv, tmp_path, ready):
    """Runs `kbert argv` with TMPDIR in tmp_path, sends SIGTERM once `ready(tmpdir, stderr so
    far)` is true, and returns (exit status, stderr, tmpdir)."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(
        PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "export")]),
        TMPDIR=str(tmpdir),
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    # The default SIGTERM action, as a shell gives it (a suite run under `nohup` would pass SIG_IGN on).
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_bert_impl.cli", *map(str, argv)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
    )
    err = []
    reader = threading.Thread(target=lambda: err.extend(iter(process.stderr.readline, "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while process.poll() is None and not ready(tmpdir, "".join(err)) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert process.poll() is None, f"{argv[0]} ended before its marker: {''.join(err)[-3000:]}"
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=120)
    reader.join(timeout=10)
    return process.returncode, "".join(err), tmpdir


def _one_line(status, err, command):
    assert status == 2, (status, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"kbert {command}: terminated (SIGTERM). "), last
    return last


def _exists(folder, prefix):
    return lambda tmpdir, err: os.path.isdir(folder) and any(n.startswith(prefix) for n in os.listdir(folder))


@pytest.mark.slow  # about 20 s: a kbert process converting the text-in and MediaPipe files
def test_sigterm_inside_the_tflite_conversion_of_export_leaves_no_temporary_folder(tiny_init, tmp_path):
    # The converter's SavedModel (`kbert-convert-*`, 174 MB for MiniLM) stayed in the temp folder.
    output = tmp_path / "export"
    argv = [
        "export",
        "--model",
        tiny_init,
        "--output",
        output,
        "--formats",
        "text_tflite,mediapipe",
        "--seq-len",
        "16",
    ]
    status, err, tmpdir = _terminated(
        argv, tmp_path, lambda tmpdir, err: any(n.startswith("kbert-convert-") for n in os.listdir(tmpdir))
    )
    assert _one_line(status, err, "export").endswith(
        "Every file is written whole or not at all: run the same command again."
    )
    assert os.listdir(tmpdir) == []
    assert os.listdir(tmp_path) == ["tmpdir"]  # neither OUTPUT nor its OUTPUT.partial-PID


@pytest.mark.slow  # about 20 s: a kbert process saving the converted MiniLM
def test_sigterm_while_convert_saves_leaves_no_file(tmp_path):
    output = tmp_path / "out" / "minilm.keras"
    output.parent.mkdir()
    argv = ["convert", os.path.join(DATA, "minilm"), "--format", "huggingface", "--output", output]
    status, err, tmpdir = _terminated(argv, tmp_path, _exists(output.parent, ".tmp-"))
    _one_line(status, err, "convert")
    assert os.listdir(tmpdir) == [] and os.listdir(output.parent) == []


@pytest.mark.slow  # about 20 s: a kbert process embedding 2,000 lines
def test_sigterm_while_index_embeds_leaves_no_folder(tiny_init, tmp_path):
    lines = tmp_path / "lines.txt"
    with open(MR, encoding="utf-8-sig", newline="") as f:
        lines.write_text(
            "\n".join(text for _, (_, text) in zip(range(2000), csv.reader(f))) + "\n", encoding="utf-8"
        )
    output = tmp_path / "index"
    argv = ["index", lines, "--model", tiny_init, "--output", output, "--batch-size", "2", "--seq-len", "64"]
    status, err, tmpdir = _terminated(argv, tmp_path, lambda tmpdir, err: "Indexing 2000 lines" in err)
    _one_line(status, err, "index")
    assert os.listdir(tmpdir) == [] and sorted(os.listdir(tmp_path)) == ["lines.txt", "tmpdir"]


def _resumable(status, err, command, output):
    last = _one_line(status, err, command)
    assert last == (
        f"kbert {command}: terminated (SIGTERM). The training state of the last backup is in "
        f"{output / 'backup'}: run the same command again to resume from there."
    ), last
    assert (output / "backup" / "training_state.npz").is_file() and not (output / "model.keras").exists()


@pytest.mark.slow  # about 20 s or more each: a training process killed after its first backup
@pytest.mark.parametrize("command", ["finetune", "distill", "pretrain"])
def test_sigterm_during_training_keeps_the_backup_and_says_so(
    command, tiny_init, mr_files, tmp_path, request
):
    output = tmp_path / "run"
    train, dev = mr_files
    common = ["--output", output, "--epochs", "20", "--save-every", "2", *FAST]
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
            *common,
        ]
    elif command == "distill":
        argv = [
            "distill",
            "--teacher",
            request.getfixturevalue("tiny_run"),
            "--student-from-teacher",
            "0",
            "--train",
            train,
            "--validation",
            dev,
            *LAYOUT,
            *common,
        ]
    else:
        corpus = tmp_path / "reviews.csv"
        with open(REVIEWS, encoding="utf-8-sig", newline="") as f:
            reviews = [row for _, row in zip(range(2), csv.reader(f))]
        with open(corpus, "w", encoding="utf-8", newline="") as f:
            csv.writer(f, quoting=csv.QUOTE_ALL).writerows(reviews)
        argv = [
            "pretrain",
            "--corpus",
            corpus,
            "--corpus-format",
            "reviews-csv",
            "--vocab",
            os.path.join(DATA, "minilm", "vocab.txt"),
            "--preset",
            "bert_tiny",
            "--output",
            output,
            "--steps",
            "600",
            "--steps-per-epoch",
            "6",
            "--save-every",
            "2",
            "--dupe-factor",
            "1",
            *FAST,
        ]
    status, err, tmpdir = _terminated(
        argv, tmp_path, lambda tmpdir, err: (output / "backup" / "training_state.npz").is_file()
    )
    _resumable(status, err, command, output)
    assert os.listdir(tmpdir) == []  # finetune's scratch folder (kbert-finetune-*) too


def test_a_sigterm_handled_inside_a_finalizer_is_raised_after_it():
    # A SIGTERM that landed while TensorFlow's AtomicFunction.__del__ ran (mid-trace, in the
    # text-in conversion) was dropped with the exception Python ignores in a finalizer: the export
    # went on to exit 0.
    class Finalized:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, cli._raise_stop)
    try:
        with pytest.raises(Terminated):
            Finalized()  # dropped at once: its __del__ runs the handler here
            time.sleep(10)  # the signal, sent again, ends this wait
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_a_library_turned_into_another_error_still_reads_as_the_stop(monkeypatch, capsys, number):
    # SIGTERM mid-trace in the text-in conversion: the handler's exception, raised while
    # TensorFlow's pybind11 layer built an InvalidArgumentError, came out as a RuntimeError
    # ("MISMATCH of original and normalized active exception types") with its traceback, exit 1.
    from keras_bert_impl.commands import vocab

    cleaned = []

    def run(args):
        try:
            try:
                signal.raise_signal(number)
            except BaseException:
                raise RuntimeError("a library's own error") from None
        finally:
            cleaned.append(True)

    monkeypatch.setattr(vocab, "run", run)
    # A shell's defaults (a pytest-xdist worker ignores SIGINT), which main takes over and puts back.
    previous = {n: signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        status = cli.main(["vocab", REVIEWS, "--size", "100", "--output", "unused.txt"])
        handlers = {n: signal.getsignal(n) for n in previous}
    finally:
        for n, handler in previous.items():
            signal.signal(n, handler)
    what = "terminated (SIGTERM)" if number == signal.SIGTERM else "interrupted"
    assert (status, cleaned) == (2, [True])
    assert capsys.readouterr().err == (
        f"kbert vocab: {what}. Every file is written whole or not at all: run the same command again.\n"
    )
    assert handlers == {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
