"""tests/run_once.py under two real pytest-xdist workers: a shared build runs once, both
workers get its result, and a failed build is retried by the next worker that asks."""

import os
import subprocess
import sys

from tests.conftest import REPO

CHILD_TESTS = """
import os
import time

import pytest

from tests.run_once import once_per_run

LOG = os.environ["RUN_ONCE_LOG"]


def _build(folder):
    with open(LOG, "a") as f:
        f.write(f"{os.environ.get('PYTEST_XDIST_WORKER')}\\n")
    time.sleep(1.5)  # long enough that the other worker asks while this one builds
    (folder / "made.txt").write_text("x")
    return str(folder / "made.txt")


def _failing(folder):
    with open(LOG + ".failed", "a") as f:
        f.write("tried\\n")
    raise RuntimeError("build failed")


@pytest.mark.parametrize("case", range(4))
def test_shared(tmp_path_factory, case):
    path = once_per_run(tmp_path_factory, "shared", _build)
    assert open(path).read() == "x"


@pytest.mark.parametrize("case", range(2))
def test_failing(tmp_path_factory, case):
    with pytest.raises(RuntimeError):
        once_per_run(tmp_path_factory, "failing", _failing)
"""


def test_two_workers_build_once_and_retry_a_failed_build(tmp_path):
    child = tmp_path / "test_child.py"
    child.write_text(CHILD_TESTS, encoding="utf-8")
    log = tmp_path / "builds.log"
    env = dict(os.environ, RUN_ONCE_LOG=str(log), PYTHONPATH=REPO)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(child),
            "-n",
            "2",
            "--dist",
            "load",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "--basetemp",
            str(tmp_path / "base"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "6 passed" in done.stdout, done.stdout[-2000:]
    assert len(log.read_text().split()) == 1  # one build for four tests on two workers
    assert (
        len((tmp_path / "builds.log.failed").read_text().split()) == 2
    )  # nothing recorded: each asker tries
