"""The README tour's first three kbert commands (convert -> fine-tune -> predict), run as
written by the `kbert` script of the Python that runs this file (issue 32, item 5).

`make test-pythons` runs it in each .venv-pyXY after the fast suite: the suite calls
`cli.main` in-process, so this is the check that the installed console script works on that
Python, end to end, on the real all-MiniLM-L6-v2 folder and real MR rows (the world of
tests/test_readme_commands.py: 80 training and 32 validation sentences, so each step does
its real work at a small scale). It prints each step's wall time and exits non-zero on the
first command that fails or a prediction that does not name a label of the run.

    .venv-py312/bin/python -m tests.pythons_tour
"""

import os
import pathlib
import platform
import shlex
import subprocess
import sys
import tempfile
import time

from keras_bert_impl.commands import task_data
from tests.test_readme_commands import build_world, page_commands

# convert, finetune, predict: the tour's first three commands.
TOUR_STEPS = 3


def tour_commands():
    """The README's first TOUR_STEPS kbert commands, as argv lists after `kbert`."""
    commands = [shlex.split(command) for _, command in page_commands("README.md")]
    kbert = [words[1:] for words in commands if words[0] == ".venv/bin/kbert"]
    return kbert[:TOUR_STEPS]


def main():
    # The kbert script installed beside this interpreter (sys.executable is the venv's python).
    kbert = os.path.join(os.path.dirname(sys.executable), "kbert")
    print(f"pythons_tour: Python {platform.python_version()} ({kbert})", flush=True)
    with tempfile.TemporaryDirectory(prefix="pythons_tour_") as folder:
        build_world(pathlib.Path(folder))
        for argv in tour_commands():
            start = time.perf_counter()
            result = subprocess.run([kbert, *argv], cwd=folder, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            print(f"pythons_tour: kbert {argv[0]}: exit {result.returncode}, {seconds:.1f} s", flush=True)
            if result.returncode != 0:
                sys.stderr.write(result.stdout + result.stderr)
                return 1
        # predict prints "label<TAB>probability<TAB>sentence" per sentence (the arguments after
        # --model's value), each label one of the run's.
        labels = task_data.read_task_file(os.path.join(folder, "runs", "mr"))["label_names"]
        print(result.stdout, end="")
        rows = [line.split("\t") for line in result.stdout.splitlines() if line.strip()]
        sentences = argv[argv.index("--model") + 2 :]
        if [row[-1] for row in rows] != sentences or not all(row[0] in labels for row in rows):
            sys.stderr.write(
                f"pythons_tour: expected one line per sentence {sentences} with a label of "
                f"{labels}, got {result.stdout!r}\n"
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
