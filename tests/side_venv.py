"""Running a script in one of the side venvs (`.venv-jax`, `.venv-torch`, `.venv-peers`: no TensorFlow there)
from a test, with this repository on PYTHONPATH and none of the TensorFlow side's Keras/XLA/TF
settings leaking in. tests/backends/ and tests/huggingface/ run their child scripts through it."""

import os
import subprocess

import pytest

from tests.conftest import REPO


# The make target that builds each side venv (the others: `make backend-venvs`).
MAKE_TARGET = {".venv-peers": "peers-venv"}


def side_python(venv):
    """The python of the side venv `venv` (a folder name under the repository, e.g. ".venv-torch")."""
    python = os.path.join(REPO, venv, "bin", "python")
    if not os.access(python, os.X_OK):
        pytest.fail(
            f"{python} is missing: run `make {MAKE_TARGET.get(venv, 'backend-venvs')}` "
            "(make test-slow does it for you)."
        )
    return python


def run_in_side_venv(venv, script, *args, env=None, timeout=900, cwd=REPO, input=None):
    """Runs `script` with `args` in `venv` (in folder `cwd`, `input` on its stdin); returns its
    stdout (a failure shows its stderr)."""
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith(("KERAS_", "XLA_", "TF_"))
    }
    environment.update(
        {
            "PYTHONPATH": os.pathsep.join([REPO, os.path.join(REPO, "export")]),
            "PYTHONHASHSEED": "0",
            **(env or {}),
        }
    )
    result = subprocess.run(
        [side_python(venv), script, *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
        cwd=cwd,
        input=input,
    )
    assert result.returncode == 0, f"{os.path.basename(script)} in {venv} failed:\n{result.stderr[-6000:]}"
    return result.stdout
