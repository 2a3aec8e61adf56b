"""Every shell command in the code blocks of README.md and of every docs/*.md page runs as
written (issues 17 and 29).

The commands are read from the files on every run, so the test follows edits to them, and a
new page under docs/ is picked up without touching this file (NOT_PAGES lists the one that
is not a topic page). Each `kbert` command (`kbert ...`, `.venv/bin/kbert ...`,
`cat FILE | kbert ...`) runs through `cli.main`, the function behind the `kbert` script:
the README's first (its tour makes runs/mr, the fine-tuned model the pages start from),
then each page's in page-name order, all in one folder laid out as the pages assume:
`data/minilm` is the real all-MiniLM-L6-v2 folder of DATA.md, and the files the examples
name (train.csv, dev.csv, sentences.txt, reviews.csv, ...) hold a few real MR sentences
and movie reviews, so each command does its real work at a small scale: one batch of 32
rows to train on (and to calibrate int8 on), 16 to validate on, 24 unlabeled sentences.
With 16 validation rows `kbert export` times batch 1 only (its report skips a batch larger
than the examples); tests/export time both batches on 500. A command that a
page repeats from the tour (the same arguments) runs once. The liberties taken are SCALE,
a step count that would take minutes here, and TIMING, fewer latency rounds for a command
that times what it has already checked. A `make` command must name a target of the
Makefile (make test and fresh-clone-check run them); a command this test cannot run is in
NOT_RUN with the reason, and a command that is in neither fails the test.

The README's Python block is run by tests/test_readme.py.
"""

import csv
import io
import os
import re
import shlex
import shutil
import sys
import time

import pytest

from keras_bert_impl import cli
from tests.conftest import REPO

MR = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee2.csv")
REVIEWS = os.path.join(REPO, "data", "corpora", "polarity-en-pang&lee1.csv")

# Flag values the test lowers, and why; everything else runs as written.
SCALE = {("--steps", "3000"): ("--steps", "4")}  # 3,000 bert_tiny pretraining steps: about 9 minutes here
# Flags added to a command (its name, a flag it gives) that does not give them, and why.
# `kbert export --validation` checks every artifact on the examples, then times each artifact
# 20 rounds at batch 1 and at batch 32 (--repeats): on MiniLM that is hundreds of calls which
# check nothing; tests/export/ check the report's latency fields after --repeats 1.
TIMING = {("export", "--validation"): ("--repeats", "2")}

NOT_RUN = {
    "cd android_demo && gradle wrapper --gradle-version 9.1.0": (
        "Gradle and the Android SDK come from the network; tests/export/test_android_logic.py runs the "
        "app's code"
    ),
    "./gradlew installDebug": "needs an Android device or emulator",
    'docker run -p 8501:8501 -v "$PWD/data/demo/mr_export/serving/mr:/models/mr" -e MODEL_NAME=mr '
    "tensorflow/serving": (
        "TF Serving's binary is not installable here; tests/export/ load each SavedModel the way the "
        "server does"
    ),
    ".venv/bin/kbert serve --model exports/mr": (
        "serves until SIGTERM; tests/export/test_serve.py runs it on the session's export (with --port 0)"
    ),
    ".venv/bin/kbert serve --model exports/mr --runtime litert": (
        "serves until SIGTERM; tests/commands/test_serve_litert.py serves an export's .tflite (with --port 0)"
    ),
    ".venv/bin/kbert serve --model exports/mr --precision int8": (
        "serves until SIGTERM; tests/commands/test_serve_litert.py serves an export's dynamic_int8 .tflite "
        "(with --port 0)"
    ),
    ".venv/bin/kbert export --model runs/mr-lora --output exports/mr-lora-peft --formats huggingface "
    "--peft-adapter": (
        "its run folder comes from docs/training.md's LoRA command, a page this test reaches later; "
        "tests/huggingface/test_export_peft_adapter.py runs this export of a LoRA run and loads it in peft"
    ),
    ".venv/bin/kbert serve --model runs/sentiment --model runs/topic --model runs/spam": (
        "serves until SIGTERM, from three LoRA runs of one base; tests/commands/test_serve_adapters.py "
        "serves two such runs over REST"
    ),
    'python export/tf_serving_client.py --url http://127.0.0.1:8501 --model mr "a gripping , funny film" '
    '"dull and slow"': "needs the server above; tests/export/test_serve.py runs the client against it",
}


# docs/ pages whose fenced blocks are not commands.
NOT_PAGES = {"docs/ARCHITECTURE.md": "design notes: its blocks are diagrams"}


def doc_pages():
    """README.md, then every docs/*.md page but NOT_PAGES, by name (paths relative to REPO)."""
    pages = sorted(f"docs/{name}" for name in os.listdir(os.path.join(REPO, "docs")) if name.endswith(".md"))
    return ["README.md"] + [page for page in pages if page not in NOT_PAGES]


def readme_commands():
    """(place, command) for every command in the shell blocks (``` without a language) of
    README.md and the docs pages, place being "FILE line N"; continuation lines joined and
    comments dropped."""
    return [
        (f"{page} line {number}", command) for page in doc_pages() for number, command in page_commands(page)
    ]


def page_commands(page):
    """(line number, command) for every command in one page's shell blocks."""
    with open(os.path.join(REPO, page), encoding="utf-8") as f:
        lines = f.read().splitlines()
    commands, block, pending = [], None, None
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            block = line[3:].strip() if block is None else None
            continue
        if block != "":
            continue
        text = line if pending is None else pending[1] + " " + line.strip()
        start = number if pending is None else pending[0]
        if text.rstrip().endswith("\\"):
            pending = (start, text.rstrip()[:-1].rstrip())
            continue
        pending = None
        if shlex.split(text, comments=True):  # not a comment line
            commands.append((start, re.sub(r"\s+#.*$", "", text).strip()))
    return commands


def _mr_rows():
    with open(MR, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))  # quoted fields, some with line breaks inside
    positive = [row for row in rows if row[0] == "1"]
    negative = [row for row in rows if row[0] == "-1"]
    return positive, negative


def _write_csv(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def build_world(folder):
    """The files the README's examples name, with real text in them."""
    positive, negative = _mr_rows()
    data = folder / "data"
    data.mkdir()
    (data / "minilm").symlink_to(os.path.join(REPO, "data", "minilm"))
    # Every MiniLM command (fine-tune, distill, LoRA, int8 calibration, export's checks) costs in
    # proportion to these rows: one default batch to train on, half one to validate on.
    _write_csv(folder / "train.csv", positive[:16] + negative[:16])
    _write_csv(folder / "dev.csv", positive[40:48] + negative[40:48])
    sentences = positive[100:112] + negative[100:112]
    _write_lines(folder / "sentences.txt", [" ".join(text.split()) for _, text in sentences])
    _write_lines(
        folder / "labels.txt", ["positive" if label == "1" else "negative" for label, _ in sentences]
    )
    with open(REVIEWS, encoding="utf-8-sig", newline="") as f:
        reviews = list(csv.reader(f))
    _write_csv(folder / "reviews.csv", reviews[:12])
    review_sentences = [line.strip() for _, text in reviews for line in text.splitlines() if line.strip()]
    _write_lines(folder / "reviews.txt", review_sentences[:24])
    shutil.copy(os.path.join(REPO, "data", "minilm", "vocab.txt"), folder / "vocab.txt")
    # Sentences with "play" as a noun and as a verb, from the reviews themselves.
    plays = [s for s in review_sentences if re.search(r"\bplays?\b", s)]
    nouns = [s for s in plays if re.search(r"\b(the|a|this) play\b", s)]
    verbs = [s for s in plays if re.search(r"\bplays\b", s) and s not in nouns]
    assert len(nouns) >= 2 and len(verbs) >= 2, (len(nouns), len(verbs))
    _write_lines(folder / "nouns.txt", nouns[:8])
    _write_lines(folder / "verbs.txt", verbs[:8])


def _is_kbert(command):
    return any(word in ("kbert", ".venv/bin/kbert") for word in shlex.split(command.replace("|", " ")))


def _makefile_targets():
    with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as f:
        return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", f.read(), flags=re.MULTILINE))


def _argv(command):
    """(argv after `kbert`, stdin file or None) of a `kbert` command, SCALE and TIMING applied."""
    stdin = None
    if "|" in command:
        source, command = (part.strip() for part in command.split("|", 1))
        words = shlex.split(source)
        assert words[0] == "cat" and len(words) == 2, f"unsupported pipe in README command: {source!r}"
        stdin = words[1]
    words = shlex.split(command)
    assert words[0] in ("kbert", ".venv/bin/kbert"), command
    argv = words[1:]
    for (flag, value), (new_flag, new_value) in SCALE.items():
        for i in range(len(argv) - 1):
            if argv[i] == flag and argv[i + 1] == value:
                argv[i], argv[i + 1] = new_flag, new_value
    for (name, given), (flag, value) in TIMING.items():
        if argv[0] == name and given in argv and flag not in argv:
            argv += [flag, value]
    return argv, stdin


def _run(argv, stdin, monkeypatch):
    if stdin is None:
        return cli.main(argv)
    with open(stdin, "rb") as f, monkeypatch.context() as patch:
        patch.setattr(sys, "stdin", io.TextIOWrapper(f, encoding="utf-8"))
        return cli.main(argv)


def test_every_readme_command_is_run_or_listed():
    """The cheap half: every command of the README and the docs pages is a kbert command, a
    Makefile target or in NOT_RUN, and every NOT_RUN entry is still on some page."""
    commands = [command for _, command in readme_commands()]
    targets = _makefile_targets()
    for command in commands:
        words = shlex.split(command)
        if command in NOT_RUN or _is_kbert(command):
            continue
        assert words[0] == "make", (
            f"command {command!r} is neither kbert nor make: run it here or list it in NOT_RUN"
        )
        for target in words[1:]:
            assert target in targets, f"a page runs `make {target}`, which the Makefile does not define"
    for command in NOT_RUN:
        assert command in commands, f"NOT_RUN lists {command!r}, which no page has any more"
    assert sum(1 for c in commands if _is_kbert(c)) >= 15  # the parser still finds the examples


@pytest.mark.slow
def test_readme_kbert_commands_run_as_written(tmp_path, monkeypatch, capsys):
    build_world(tmp_path)
    monkeypatch.chdir(tmp_path)
    ran, seen = [], set()
    for line, command in readme_commands():
        if not _is_kbert(command) or command in NOT_RUN:
            continue
        argv, stdin = _argv(command)
        if (tuple(argv), stdin) in seen:  # a page repeating the tour's command: it ran above
            continue
        seen.add((tuple(argv), stdin))
        start = time.perf_counter()
        status = _run(argv, stdin, monkeypatch)
        out, err = capsys.readouterr()
        assert status == 0, f"{line}: `{command}` exited {status}:\n{err[-3000:]}"
        ran.append((line, argv, time.perf_counter() - start, out))
        if "--output" in argv:
            output = argv[argv.index("--output") + 1]
            assert os.path.exists(output), f"{line}: `{command}` wrote no {output}"
        if stdin is not None and "--file" in argv:
            with open(stdin, encoding="utf-8") as f:
                expected = sum(1 for _ in f)
            assert len(out.splitlines()) == expected, (
                f"{line}: {len(out.splitlines())} output lines for {expected} input lines"
            )
    with capsys.disabled():
        for line, argv, seconds, _ in ran:
            print(f"{line}: kbert {' '.join(argv)[:90]} ... {seconds:.1f} s")
    assert len(ran) >= 15
