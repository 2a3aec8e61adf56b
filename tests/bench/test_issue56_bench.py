"""Issue 56's bench pieces on the CPU: attribute_hlo's table of the Pallas kernels, the PyTorch peer
(bench/gpu/torch_peer.py) at toy sizes in .venv-torch, and bench/gpu/run_issue56.sh end to end at
toy sizes (JAX on the CPU with the kernels interpreted, PyTorch eager on the CPU)."""

import json
import math
import os
import subprocess

import numpy as np
import pytest

from bench.gpu.attribute_hlo import attribute, parse_hlo
from bench.gpu.gpu_bench import train_flops
from bench.gpu.torch_peer import TINY
from tests.bench.test_attribute_hlo import HLO
from tests.conftest import REPO
from tests.side_venv import side_python

SCRIPT = os.path.join(REPO, "bench", "gpu", "run_issue56.sh")


def test_the_pallas_kernels_are_summed_by_their_names_apart_from_the_library_kernels():
    computations, _ = parse_hlo(HLO)
    kernels = {
        "loop_convert_multiply_fusion_11": 3.5,
        "residual_dropout_layer_norm": 2.0,
        "residual_dropout_layer_norm_backward": 3.0,
        "bias_gelu_backward": 1.5,
        "bias_gelu": 1.0,
        "nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_splitK_NTN": 9.0,
    }
    report = attribute(kernels, computations)
    assert report["pallas_ms_per_step"] == {
        "residual_dropout_layer_norm_backward": 3.0,
        "residual_dropout_layer_norm": 2.0,
        "bias_gelu_backward": 1.5,
        "bias_gelu": 1.0,
    }
    assert report["pallas_total_ms_per_step"] == 7.5
    assert report["unmapped_ms_per_step"] == {"nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_splitK_NTN": 9.0}
    assert report["mapped_ms_per_step"] == 3.5


def test_the_device_script_parses():
    assert subprocess.run(["bash", "-n", SCRIPT], capture_output=True, text=True).returncode == 0


@pytest.fixture(scope="module")
def issue56_toy_run(tmp_path_factory):
    """bench/gpu/run_issue56.sh end to end at toy sizes, once for the module: its output folder. Its
    torch_peer step is the PyTorch peer's toy run in .venv-torch (eager, `--tiny --no-compile`),
    which the peer's own test reads rather than running the peer a second time."""
    root = tmp_path_factory.mktemp("issue56")
    carry = root / "carry"  # sweep.sh needs a manifest; no wheels: .venv-jax has Keras
    carry.mkdir()
    (carry / "manifest.json").write_text("{}")
    out = root / "out"
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith(("KERAS_", "XLA_", "TF_"))
    }
    environment.update(
        TINY="1", CARRY=str(carry), PYTHON=side_python(".venv-jax"), TORCH_PYTHON=side_python(".venv-torch")
    )
    result = subprocess.run(
        ["bash", SCRIPT, str(out)], capture_output=True, text=True, env=environment, cwd=REPO, timeout=2400
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return out


@pytest.mark.slow
def test_the_torch_peer_trains_and_times_inference_at_toy_sizes_on_the_cpu(issue56_toy_run):
    """Eager (--no-compile): torch.compile works here too (gcc is installed) but took 249 s to
    compile the toy training step on the 2-core machine."""
    log = (issue56_toy_run / "sweep.log").read_text()
    assert "=== torch_peer: exit 0" in log, log[-4000:]
    report = json.loads((issue56_toy_run / "torch_peer.json").read_text())
    assert report["environment"]["device"] == "cpu" and not report["environment"]["keras_imported"]
    run = report["pretrain"]["runs"][0]
    assert run["batch"] == 4 and run["steps_timed"] == 2
    # The FLOP convention is gpu_bench's own: matmuls at the masked positions only.
    assert run["train_flops_per_step"] == train_flops(TINY, 4, 16, predictions=4)
    # A randomly initialised model predicts about uniformly: MLM near ln(V), NSP near ln(2).
    assert abs(run["final_loss"] - (math.log(TINY["vocabulary_size"]) + math.log(2))) < 0.5, run
    tiny = report["inference"]["models"]["tiny"]
    assert set(tiny) == {"shape", "batch_1", "batch_8"}
    for batch in ("batch_1", "batch_8"):
        assert np.isfinite(tiny[batch]["latency_ms_p50"]) and tiny[batch]["sequences_per_s"] > 0


@pytest.mark.slow
def test_the_issue56_device_script_runs_end_to_end_at_toy_sizes(issue56_toy_run):
    out = issue56_toy_run
    log = (out / "sweep.log").read_text()
    assert "=== unfused: exit 0" in log and "=== fused: exit 0" in log and "=== torch_peer: exit 0" in log, (
        log[-4000:]
    )
    # What the device tool brings back: at most eight files, every one of them here.
    assert sorted(os.listdir(out)) == [
        "fused.json",
        "fused_attribution.json",
        "nvidia_smi.csv",
        "summary.json",
        "sweep.log",
        "torch_peer.json",
        "unfused.json",
    ]
    fused = json.loads((out / "fused.json").read_text())
    assert fused["pretrain"]["fused_kernels"] and fused["inference"]["fused_kernels"]
    assert np.isfinite(fused["pretrain"]["runs"][0]["final_loss"])
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["pretrain"]) == {"ours_keras_ops", "ours_fused", "torch"}
    assert all(summary["pretrain"][side]["4"]["steps_per_s"] > 0 for side in summary["pretrain"])
    assert set(summary["inference"]["torch"]["tiny"]) == {"batch_1", "batch_8"}
    assert set(summary["inference"]["ours_fused"]["tiny"]) == {"batch_1", "batch_8"}
