"""bench/gpu/: the FLOP count against the built models' own kernels, the datasheet lookup, and
the whole script at toy sizes on the JAX CPU backend (the GPU machine's JAX 0.11.2, no
TensorFlow), from a carry folder made by bench/gpu/prepare.py."""

import json
import os
import subprocess

import numpy as np
import pytest

from bench.gpu.gpu_bench import datasheet_peak, forward_flops, train_flops
from keras_bert_impl.models import BERT_PRESETS, BertBackbone, BertClassifier, BertPretrainer
from tests.conftest import REPO

JAX_PYTHON = os.path.join(REPO, ".venv-jax", "bin", "python")


def kernel_flops(model, batch, seq_len, predictions=0):
    """2 * in * out per row for every Dense kernel of the model, each applied to the rows it
    sees (tokens, masked positions or sequences), plus the attention's two T x T matmuls and
    the masked-LM head's tied output projection: counted from the variables, not the config."""
    total = 0
    for variable in model.weights:
        path, shape = variable.path, tuple(variable.shape)
        if not path.endswith("/kernel") or len(shape) != 2:
            continue
        if path.startswith("transformer_layer_"):
            rows = batch * seq_len
        elif path.startswith("masked_lm_head/"):
            rows = batch * predictions
        else:  # the pooler, the NSP head, a classifier's logits: once per sequence
            rows = batch
        total += 2 * shape[0] * shape[1] * rows
    backbone = model.backbone
    total += backbone.num_layers * 2 * 2 * seq_len * seq_len * backbone.hidden_dim * batch
    if predictions:
        total += 2 * backbone.hidden_dim * backbone.vocabulary_size * batch * predictions
    return total


@pytest.fixture(scope="module")
def tiny_carry(tmp_path_factory):
    """A carry folder without wheels (.venv-jax has Keras) for the JAX CPU runs below, made once for
    the module: bench/gpu/prepare.py converts MiniLM and tokenizes MR, the same for every run."""
    from bench.gpu.prepare import main as prepare

    if not os.access(JAX_PYTHON, os.X_OK):
        pytest.fail(f"{JAX_PYTHON} is missing: run `make backend-venvs` (make test does it for you).")
    carry = tmp_path_factory.mktemp("gpu_bench") / "carry"
    prepare(["--output", str(carry), "--no-wheels"])
    return carry


def _clean_environment(**extra):
    """This process's environment without Keras', XLA's or TensorFlow's settings, plus `extra`."""
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith(("KERAS_", "XLA_", "TF_"))
    }
    return {**environment, **extra}


@pytest.mark.parametrize("preset", ["bert_tiny", "bert_base"])
def test_the_flop_count_matches_the_kernels_of_the_built_models(preset):
    config = BERT_PRESETS[preset]
    backbone = BertBackbone(**config)  # one for both heads: initializing BERT-base's costs seconds
    pretrainer = BertPretrainer(backbone)
    assert forward_flops(config, 4, 128, predictions=20) == kernel_flops(pretrainer, 4, 128, predictions=20)
    classifier = BertClassifier(backbone, num_classes=2)
    assert forward_flops(config, 32, 64, num_classes=2) == kernel_flops(classifier, 32, 64)
    assert train_flops(config, 4, 128, predictions=20) == 3 * forward_flops(config, 4, 128, predictions=20)


def test_bert_base_pretraining_flops_are_near_six_times_parameters_times_tokens():
    """Kaplan et al.'s rule of thumb (6 N per token for a training step, N the non-embedding
    parameters) as an outside cross-check: the attention's T x T matmuls and the MLM head add
    a few percent at length 128."""
    config = BERT_PRESETS["bert_base"]
    h, i, layers = config["hidden_dim"], config["intermediate_dim"], config["num_layers"]
    non_embedding = layers * (4 * h * h + 2 * h * i)
    rule = 6 * non_embedding * 128
    ours = train_flops(config, 1, 128)
    assert 1.0 < ours / rule < 1.1, ours / rule


def test_the_datasheet_peak_is_found_by_device_kind():
    assert datasheet_peak("NVIDIA H100 80GB HBM3") == ("H100 SXM", 989.4)
    assert datasheet_peak("NVIDIA H100 PCIe") == ("H100 PCIe", 756.0)
    assert datasheet_peak("NVIDIA H200") == ("H200", 989.4)
    assert datasheet_peak("cpu") == (None, None)


@pytest.mark.slow
def test_the_gpu_bench_runs_on_the_jax_cpu_backend_at_tiny_sizes(tiny_carry, sweep_run):
    """Every phase but inference (gpu_bench's default phases) at toy sizes: sweep_run's `dumped`
    configuration; its levers change nothing this test reads."""
    carry = tiny_carry
    manifest = json.loads((carry / "manifest.json").read_text())
    assert (
        manifest["total_bytes"] < 60 * 2**20
    )  # room for the wheels (2.9 MB) within the 64 MiB a call carries
    with np.load(carry / "mr_ids.npz") as ids:
        assert ids["train_token_ids"].shape == (3200, 64) and ids["test_token_ids"].shape == (800, 64)
        assert (
            ids["train_token_ids"].dtype == np.uint16 and (ids["train_token_ids"][:, 0] == 101).all()
        )  # [CLS]
        assert ids["test_labels"].sum() == 400  # the stratified split: 400 of each class held out

    _, out, _ = sweep_run
    log = (out / "sweep.log").read_text()
    assert "=== dumped: exit 0" in log, log[-4000:]
    report = json.loads((out / "dumped.json").read_text())
    assert "errors" not in report
    assert report["environment"]["keras_backend"] == "jax" and report["environment"]["jax"] == "0.11.2"
    assert report["environment"]["tensorflow_imported"] is False
    assert report["matmul"]["tflops"] > 0
    run = report["pretrain"]["runs"][0]
    assert run["batch"] == 4 and run["steps_timed"] == 3 and run["step_s_median"] > 0
    assert run["train_flops_per_step"] == train_flops(BERT_PRESETS["bert_tiny"], 4, 16, predictions=4)
    assert np.isfinite(run["final_loss"]) and 0 < run["mfu_measured_matmul"]
    finetune = report["finetune"]
    assert finetune["train_examples"] == 64 and finetune["test_examples"] == 32
    assert 0.0 <= finetune["runs"]["0"]["test_accuracy"] <= 1.0
    assert finetune["seed_spread_cpu_fp32"]["min"] <= finetune["seed_spread_cpu_fp32"]["max"]


@pytest.fixture(scope="module")
def sweep_run(tiny_carry, tmp_path_factory):
    """bench/gpu/sweep.sh (the levers_3 slot's one command) on the JAX CPU backend, once for the
    module: a configuration whose flags gpu_bench refuses, then one that asks for an HLO dump and
    runs the default phases (matmul, pretrain, finetune) at --tiny with the levers of
    bench/results/gpu/levers/ (--attention-dropout 0, JAX's fused attention, and --prng unsafe_rbg).
    The tiny-sizes test, the levers' test and the sweep's test read the one run: a gpu_bench process
    each cost them a JIT compile of every step."""
    root = tmp_path_factory.mktemp("sweep")
    out, dump = root / "out", root / "dump"
    environment = _clean_environment(CARRY=str(tiny_carry), PYTHON=JAX_PYTHON)
    result = subprocess.run(
        [
            "bash",
            "bench/gpu/sweep.sh",
            str(out),
            "refused",
            "",
            "--tiny --phases nonsense",
            "dumped",
            f"--xla_dump_to={dump} --xla_dump_hlo_as_text",
            "--tiny --seeds 0 --attention-dropout 0 --prng unsafe_rbg",
        ],
        capture_output=True,
        text=True,
        env=environment,
        cwd=REPO,
        timeout=900,
    )
    return result, out, dump


@pytest.mark.slow
def test_the_levers_run_at_tiny_sizes_and_rbg_dropout_drops_its_rate(sweep_run):
    """--attention-dropout 0 (JAX's fused attention) and --prng unsafe_rbg, the levers of
    bench/results/gpu/levers/, on the JAX CPU backend (sweep_run's `dumped` configuration);
    unsafe_rbg's masks keep the rate and change from draw to draw."""
    _, out, _ = sweep_run
    log = (out / "sweep.log").read_text()
    assert "=== dumped: exit 0" in log, log[-4000:]
    report = json.loads((out / "dumped.json").read_text())
    assert "errors" not in report
    assert report["pretrain"]["attention_dropout"] == 0.0 and report["pretrain"]["prng"] == "unsafe_rbg"
    assert np.isfinite(report["pretrain"]["runs"][0]["final_loss"])
    environment = _clean_environment(KERAS_BACKEND="jax", PYTHONPATH=REPO)
    check = (
        "import json, keras, numpy as np\nfrom bench.gpu.gpu_bench import "
        "use_rbg_dropout_keys\nuse_rbg_dropout_keys()\nseed = keras.random.SeedGenerator(0)\na, b = "
        "(keras.ops.convert_to_numpy(keras.random.dropout(np.ones(100_000, 'float32'), 0.1, seed=seed)) "
        "for _ in range(2))\nprint(json.dumps([float((a == 0).mean()), float((b == 0).mean()), float((a != "
        "b).mean())]))\n"
    )
    result = subprocess.run(
        [JAX_PYTHON, "-c", check], capture_output=True, text=True, env=environment, cwd=REPO, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    dropped_a, dropped_b, differ = json.loads(result.stdout.strip().splitlines()[-1])
    assert 0.095 < dropped_a < 0.105 and 0.095 < dropped_b < 0.105  # 100,000 draws: sd 0.001
    assert (
        0.15 < differ < 0.21
    )  # two independent masks differ where one drops and the other keeps: 2 x 0.1 x 0.9


def test_the_sweep_refuses_configurations_that_do_not_come_in_threes(tmp_path):
    result = subprocess.run(
        ["bash", "bench/gpu/sweep.sh", str(tmp_path), "only_a_name", "--xla_flag"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert result.returncode == 2
    assert "come in threes" in result.stderr and "got 2 argument(s): only_a_name --xla_flag" in result.stderr
    assert not (tmp_path / "sweep.log").exists()


@pytest.mark.slow
def test_the_sweep_runs_each_configuration_in_its_own_process_and_goes_on_past_a_failure(sweep_run):
    """bench/gpu/sweep.sh (the levers_3 slot's one command) on the JAX CPU backend: a configuration
    whose flags gpu_bench refuses is logged with its exit status and the next one still runs, its
    XLA_FLAGS reaching its own process (the HLO dump it asks for is made and summarised)."""
    result, out, dump = sweep_run
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    log = (out / "sweep.log").read_text()
    assert log.rstrip().endswith("sweep: 1 of 2 configuration(s) failed: refused")
    assert "=== refused: exit 2" in log and "invalid choice: 'nonsense'" in log
    assert not (out / "refused.json").exists()
    assert "=== dumped: exit 0" in log and "--- dumped: cuBLASLt epilogues" in log
    report = json.loads((out / "dumped.json").read_text())
    assert report["environment"]["xla_flags"] == f"--xla_dump_to={dump} --xla_dump_hlo_as_text"
    assert np.isfinite(report["pretrain"]["runs"][0]["final_loss"])
    assert any(name.endswith("after_optimizations.txt") for name in os.listdir(dump))
