"""Work the whole test run shares, done once whatever the number of pytest-xdist workers.

`make test` runs two workers, each a process with its own session fixtures, so a session
fixture that fine-tunes and exports MiniLM (minutes) would run once per worker; and two
workers running the same `make` set-up target at once race on its files. Both are solved with
a file lock:

- `once_per_run(tmp_path_factory, name, build)`: the first worker to ask runs `build(folder)`
  in a folder under the run's shared temporary root and records its JSON-able result; a worker
  asking while that runs waits on the lock, then reads the result. A failed build records
  nothing, so the next asker tries again (and fails with the same message).
- `make_target(target)`: a Makefile set-up target (`make edge-setup`, `make mediapipe-venv`)
  run by one process of this machine at a time: apt-get, npm and pip into one venv must not run
  twice at once, and another checkout's test run may be running them too. Quick once done.
"""

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shared_root(tmp_path_factory):
    """The temporary folder every worker of this run shares: xdist gives each worker a
    `popen-gwN` folder under one run folder; without xdist the run's own base folder."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _locked(path):
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # blocks until the holder releases it (or dies: the OS drops it)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def once_per_run(tmp_path_factory, name, build):
    """`build(folder)`'s result, computed by the first worker of this run that asks for `name`.
    `folder` is an empty folder kept for the whole run; the result must be JSON-able (paths,
    not models)."""
    root = shared_root(tmp_path_factory)
    result_file = root / f"{name}.result.json"
    with _locked(root / f"{name}.lock"):
        if result_file.is_file():
            return json.loads(result_file.read_text(encoding="utf-8"))
        folder = root / name
        if folder.exists():  # a build that failed in another worker: start over
            shutil.rmtree(folder)
        folder.mkdir()
        result = build(folder)
        temporary = result_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(result), encoding="utf-8")
        os.replace(temporary, result_file)
        return result


def make_target(target, timeout=1200):
    """Run `make TARGET` in this checkout under a machine-wide lock; an error message, or None."""
    with _locked(os.path.join(tempfile.gettempdir(), f"keras_bert_impl-make-{target}.lock")):
        done = subprocess.run(["make", "-C", REPO, target], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        return f"`make {target}` failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return None
