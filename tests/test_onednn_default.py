"""`import keras_bert_impl` turns TensorFlow's oneDNN kernels on for x86 CPUs before TensorFlow
loads (TensorFlow's own default is Eigen's on CPUs without VNNI, BF16 or AMX; oneDNN's fused
matmuls ran the fine-tuned MiniLM's forward faster there, bench/results/forward_gap.json), and
a TF_ENABLE_ONEDNN_OPTS the user set wins. In a fresh process each: the switch is read once."""

import os
import platform
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = (
    "import keras_bert_impl, os; from tensorflow.python.util import _pywrap_util_port; "
    "print(os.environ['TF_ENABLE_ONEDNN_OPTS'], _pywrap_util_port.IsMklEnabled())"
)


def _run(**env):
    clean = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    done = subprocess.run(
        [sys.executable, "-c", CHECK],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(clean, PYTHONPATH=REPO, **env),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()[-2:]


@pytest.mark.slow  # about 20 s or more: two fresh processes import TensorFlow
@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"), reason="oneDNN's switch is set on x86 only"
)
def test_onednn_is_on_unless_the_user_says_otherwise():
    assert _run() == ["1", "True"]
    assert _run(TF_ENABLE_ONEDNN_OPTS="0") == ["0", "False"]
