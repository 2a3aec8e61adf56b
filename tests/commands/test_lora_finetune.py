"""`kbert finetune --lora-rank`: adapters and head trained, the rest of --init untouched; the
run folder, resume and metrics as a full fine-tune's; bad LoRA flags in one line."""

import argparse
import json

import keras
import numpy as np
import pytest

from keras_bert_impl.commands.model_files import rebuilt_backbone
from keras_bert_impl.commands.training_flags import LORA_TARGET_NAMES, spec_options
from keras_bert_impl.models import merge_lora
from tests.commands.conftest import save_small_bert
from tests.commands.test_training_commands import _finetune, _interrupted, run_over_two_cpus

CSV = ("--no-header", "--columns", "label,text")


def _backbone_weights(model):
    backbone = getattr(model, "backbone", model)
    return {v.path: v.numpy() for v in backbone.weights if "lora_kernel" not in v.path}


def test_lora_run_trains_adapters_and_head_only(tiny_init, mr_files, tmp_path, capsys):
    train, dev = mr_files
    run = tmp_path / "run"
    assert _finetune(tiny_init, run, "classification", train, dev, *CSV, "--lora-rank", "4") == 0
    err = capsys.readouterr().err
    metrics = json.loads((run / "metrics.json").read_text())
    lora = metrics["lora"]
    model = keras.saving.load_model(run / "model.keras")
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    total = sum(int(np.prod(v.shape)) for v in model.weights)
    assert lora == {
        "rank": 4,
        "alpha": 4,
        "targets": ["query", "value"],
        "trainable_parameters": trainable,
        "parameters": total,
        "trainable_share": trainable / total,
    }
    # One layer, hidden 16: a [16, 4] and b [4, 16] on query and value, and the [16, 2] head.
    assert trainable == 2 * (16 * 4 + 4 * 16) + 16 * 2 + 2
    assert f"{trainable:,} of {total:,} parameters trainable" in err
    settings = json.loads((run / "run.json").read_text())["settings"]
    assert settings["lora_rank"] == 4 and "lora_targets" not in settings  # not given
    assert model.backbone.lora_settings == {"rank": 4, "alpha": 4, "targets": ["query", "value"]}
    # Every weight of --init but the adapters is as it was; the adapters moved.
    init = _backbone_weights(keras.saving.load_model(tiny_init))
    trained = _backbone_weights(model)
    assert sorted(init) == sorted(trained)
    for path, value in init.items():
        np.testing.assert_array_equal(trained[path], value, err_msg=path)
    assert all(np.any(v.numpy()) for v in model.weights if "lora_kernel_b" in v.path)
    # --init of a LoRA run: its encoder comes back merged, a plain one (a full fine-tune's start).
    fresh = rebuilt_backbone(model.backbone)
    assert fresh.lora_settings is None and len(fresh.trainable_weights) == len(fresh.weights)
    merged = {v.path: v.numpy() for v in merge_lora(model.backbone).weights}
    for variable in fresh.weights:
        np.testing.assert_array_equal(variable.numpy(), merged[variable.path], err_msg=variable.path)
    assert fresh.vocabulary == model.backbone.vocabulary


def test_a_run_without_lora_records_no_lora_setting():
    args = argparse.Namespace(
        output="o", precision="fp32", seed=0, save_every=1, quiet=True, overwrite=False, keep_backup=False
    )
    args.lora_rank, args.lora_targets, args.epochs = None, None, 3
    assert spec_options(args, "finetune", inputs=())["settings"] == {
        "precision": "fp32",
        "seed": 0,
        "epochs": 3,
    }
    args.lora_rank = 2
    assert spec_options(args, "finetune", inputs=())["settings"]["lora_rank"] == 2


def test_target_names_are_the_models_own():
    from keras_bert_impl.models import LORA_TARGET_NAMES as MODEL_NAMES

    assert LORA_TARGET_NAMES == MODEL_NAMES


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--lora-rank", "0"], "--lora-rank"),
        (
            ["--lora-targets", "query"],
            "--lora-targets chooses the layers of --lora-rank: give --lora-rank R too.",
        ),
        (["--lora-rank", "2", "--qat"], "--lora-rank 2 with --qat"),
        (["--lora-rank", "2", "--lora-targets", "query", "qkv"], "--lora-targets 'qkv' names no Dense layer"),
        (
            ["--lora-rank", "2", "--lora-targets", "transformer_layer_7/attention/query"],
            "--lora-targets 'transformer_layer_7/attention/query' names no Dense layer of the backbone",
        ),
    ],
)
def test_bad_lora_flags_are_one_line_and_exit_2(tiny_init, mr_files, tmp_path, capsys, flags, message):
    train, dev = mr_files
    assert _finetune(tiny_init, tmp_path / "run", "classification", train, dev, *CSV, *flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # A path is checked against the --init encoder once it is read: after the progress lines.
    assert message in err[-1] and ("/" in flags[-1] or len(err) == 1), err


@pytest.mark.slow  # about 20 s or more: an uninterrupted, an interrupted and a resumed run
def test_interrupted_lora_run_resumes_to_the_uninterrupted_weights(
    tiny_init, mr_files, tmp_path, capsys, monkeypatch
):
    train, dev = mr_files
    args = (*CSV, "--save-every", "3", "--lora-rank", "2", "--lora-targets", "query", "intermediate")
    assert _finetune(tiny_init, tmp_path / "reference", "classification", train, dev, *args) == 0
    reference = keras.saving.load_model(tmp_path / "reference" / "model.keras")

    _interrupted(
        monkeypatch, lambda: _finetune(tiny_init, tmp_path / "run", "classification", train, dev, *args), 7
    )
    capsys.readouterr()
    assert _finetune(tiny_init, tmp_path / "run", "classification", train, dev, *args) == 0
    assert "resumed from the backup at step 6 of 10" in capsys.readouterr().err
    resumed = keras.saving.load_model(tmp_path / "run" / "model.keras")
    assert [v.path for v in resumed.weights] == [v.path for v in reference.weights]
    for a, b in zip(reference.weights, resumed.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["resumed_from_step"] == 6 and metrics["lora"]["targets"] == ["query", "intermediate"]


@pytest.mark.slow  # about 40 s: fine-tunes on one device and on two CPU replicas, in one child process
def test_mirrored_lora_run_trains_like_one_device(mr_files, tmp_path):
    init = save_small_bert(tmp_path, dropout=0.0)  # no dropout: the two runs draw no masks
    train, dev = mr_files
    argv = ["finetune", "--task", "classification", "--init", init, "--train", train, "--validation", dev]
    argv += [*CSV, "--seq-len", "32", "--batch-size", "8", "--epochs", "1", "--dropout", "0", "--quiet"]
    argv += ["--learning-rate", "1e-2", "--save-every", "3", "--lora-rank", "2"]
    strategies = ("one-device", "mirrored")
    commands = {s: [*argv, "--strategy", s, "--output", str(tmp_path / s)] for s in strategies}
    results = run_over_two_cpus(commands, tmp_path / "results.json")
    weights = {}
    for strategy in strategies:
        done = results[strategy]
        assert done["returncode"] == 0, done["stderr"][-3000:]
        assert f"on {1 if strategy == 'one-device' else 2} replica(s)" in done["stderr"]
        model = keras.saving.load_model(str(tmp_path / strategy / "model.keras"))
        assert model.backbone.lora_settings["rank"] == 2
        weights[strategy] = {v.path: v.numpy() for v in model.weights}
    assert any(np.any(v) for k, v in weights["mirrored"].items() if "lora_kernel_b" in k)
    gap = max(float(np.max(np.abs(v - weights["mirrored"][k]))) for k, v in weights["one-device"].items())
    assert gap < 1e-5
