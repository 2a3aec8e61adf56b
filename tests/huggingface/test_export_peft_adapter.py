"""`kbert export --formats huggingface --peft-adapter` of a LoRA classifier: the base folder
and the PEFT adapter that peft (in `.venv-torch`) loads over it give the Keras model's logits
on real text, as the merged transformers export does; the flag is refused in one line where it
has nothing to write."""

import json

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from tests.conftest import REPO
from tests.harness import minilm_vocab_backbone, randomize_like_trained
from keras_bert_impl.tokenization import BertPreprocessor
from tests.huggingface.transformers_side import BUFFERS, keras_outputs
from tests.test_readme import python_block
from tests.side_venv import run_in_side_venv

CHILD = f"{REPO}/tests/huggingface/peft_child.py"
SEQ_LEN = 24
# "output" and "attention_output" are both "...output.dense" in transformers: peft must adapt each
# where Keras does, in both layers.
TARGETS = ["query", "value", "attention_output", "output"]
TEXTS = [
    "a gripping , funny film",
    "dull and slow , with no story to speak of",
    "the performances are uniformly excellent , but the script lets them down",
    "fine",
]


@pytest.fixture(scope="module")
def lora_classifier(tmp_path_factory):
    """A two-layer, three-class LoRA classifier (rank 4, alpha 8) whose adapters are non-zero,
    as after training, saved."""
    backbone = minilm_vocab_backbone(num_layers=2)
    backbone.enable_lora(4, targets=TARGETS, alpha=8)
    model = kb.BertClassifier(backbone, num_classes=3, label_names=["neg", "mixed", "pos"])
    randomize_like_trained(model, seed=5, heads=("pooler/dense/kernel", "logits/kernel"))
    path = str(tmp_path_factory.mktemp("lora") / "lora.keras")
    model.save(path)
    return path


@pytest.mark.slow  # peft and transformers in .venv-torch, which make test-slow builds
def test_peft_loads_the_adapter_over_the_base_and_answers_as_keras(lora_classifier, tmp_path, capsys):
    out, merged = tmp_path / "exports" / "mr-lora-peft", tmp_path / "merged"  # out: the docs' path
    argv = ["export", "--model", lora_classifier, "--formats", "huggingface"]
    assert main([*argv, "--output", str(out), "--peft-adapter"]) == 0
    assert "LoRA rank 4 on query, value, attention_output, output: written as a PEFT adapter" in (
        capsys.readouterr().err
    )
    assert main([*argv, "--output", str(merged)]) == 0
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(out / "base")

    request = tmp_path / "request.json"
    request.write_text(json.dumps({"texts": TEXTS, "max_length": SEQ_LEN}), encoding="utf-8")
    lines = run_in_side_venv(
        ".venv-torch", CHILD, str(out), str(merged), str(request), str(tmp_path / "out.npz")
    ).splitlines()
    report = json.loads(lines[-1])
    with np.load(tmp_path / "out.npz") as loaded:
        arrays = dict(loaded)

    # The base holds the encoder and no head: transformers makes the head, the adapter replaces it.
    info = report["loading_info"]
    assert info["missing_keys"] == ["classifier.bias", "classifier.weight"], info
    assert not info["mismatched_keys"] and set(info["unexpected_keys"]) <= BUFFERS, info
    modules = [
        f"bert.encoder.layer.{i}.{name}"
        for i in (0, 1)
        for name in ("attention.self.query", "attention.self.value", "attention.output.dense", "output.dense")
    ]
    assert report["config"] == {
        "task_type": "SEQ_CLS",
        "r": 4,
        "lora_alpha": 8,
        "target_modules": sorted(modules),
    }
    assert report["lora_modules"] == sorted(f"base_model.model.{name}" for name in modules)
    assert report["saved_modules"] == ["base_model.model.classifier"]
    assert report["auto_equals_peft"]  # AutoPeftModel finds the base by base_model_name_or_path

    model = keras.saving.load_model(lora_classifier)
    want = keras_outputs(model, arrays)["logits"]
    assert np.abs(want).max() > 0.5 and arrays["attention_mask"].min() == 0  # real text, padded
    np.testing.assert_allclose(arrays["peft"], want, atol=1e-4, rtol=0)
    np.testing.assert_allclose(arrays["merged"], want, atol=1e-4, rtol=0)
    # The adapters matter: without them (b = 0) the logits differ by far more than the tolerance.
    for variable in model.weights:
        if variable.path.endswith("lora_kernel_b"):
            variable.assign(np.zeros(variable.shape, "float32"))
    assert np.abs(keras_outputs(model, arrays)["logits"] - want).max() > 1e-2

    # docs/export.md's peft snippet, run as written on this export at the path it names.
    snippet = tmp_path / "snippet.py"
    snippet.write_text(python_block("docs/export.md", "### A LoRA run as a PEFT adapter"), encoding="utf-8")
    printed = run_in_side_venv(".venv-torch", str(snippet), cwd=str(tmp_path)).strip().splitlines()[-1]
    model = keras.saving.load_model(lora_classifier)
    x = BertPreprocessor.from_model(model, sequence_length=16)(["a gripping , funny film", "dull and slow"])
    top = keras.ops.convert_to_numpy(model(x)["logits"]).argmax(-1)
    assert printed == str([model.label_names[i] for i in top])


def test_peft_adapter_of_a_model_without_lora_is_refused(tmp_path, capsys):
    path = str(tmp_path / "plain.keras")
    kb.BertClassifier(minilm_vocab_backbone(), num_classes=2).save(path)
    argv = ["export", "--model", path, "--output", str(tmp_path / "out"), "--formats", "huggingface"]
    assert main([*argv, "--peft-adapter"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kbert export: --peft-adapter: --model ") and "LoRA" in err[0]
    assert not (tmp_path / "out").exists()


def test_peft_adapter_is_refused_with_formats_sentence_transformers(tmp_path, capsys):
    # Other formats: tests/export/test_export_flags.py's table.
    argv = ["export", "--model", str(tmp_path / "never-loaded.keras"), "--output", str(tmp_path / "out")]
    assert main([*argv, "--formats", "sentence_transformers", "--peft-adapter"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--peft-adapter" in err[0] and "--formats huggingface" in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_taggers_adapter_holds_a_and_b_transposed_and_leaves_the_unused_pooler_out(tmp_path):
    from safetensors.numpy import load_file

    from keras_bert_impl_export.huggingface import export_peft_adapter

    tagger = kb.BertTokenClassifier(minilm_vocab_backbone(), num_classes=5)
    tagger.backbone.enable_lora(2, targets=["key", "dense"], alpha=3)
    described = export_peft_adapter(tagger, str(tmp_path / "out"))
    assert "The pooler's LoRA adapter is left out with the pooler: this head does not use it." in (
        described.notes
    )
    config = json.loads((tmp_path / "out" / "adapter" / "adapter_config.json").read_text())
    assert (config["task_type"], config["r"], config["lora_alpha"]) == ("TOKEN_CLS", 2, 3)
    assert config["target_modules"] == ["bert.encoder.layer.0.attention.self.key"]
    assert config["modules_to_save"] == ["classifier"]
    tensors = load_file(str(tmp_path / "out" / "adapter" / "adapter_model.safetensors"))
    key = "base_model.model.bert.encoder.layer.0.attention.self.key"
    layer = tagger.backbone.get_layer("transformer_layer_0").attention.key_dense
    assert sorted(tensors) == sorted(
        [f"{key}.lora_A.weight", f"{key}.lora_B.weight", "base_model.model.classifier.weight"]
        + ["base_model.model.classifier.bias"]
    )
    np.testing.assert_array_equal(tensors[f"{key}.lora_A.weight"], layer.lora_kernel_a.numpy().T)  # [r, in]
    np.testing.assert_array_equal(tensors[f"{key}.lora_B.weight"], layer.lora_kernel_b.numpy().T)  # [out, r]
    np.testing.assert_array_equal(
        tensors["base_model.model.classifier.weight"], tagger.output_dense.kernel.numpy().T
    )
    base = load_file(str(tmp_path / "out" / "base" / "model.safetensors"))
    assert not [name for name in base if name.startswith(("classifier.", "bert.pooler."))]
    kernel = next(v for v in layer.weights if v.name == "kernel")  # without the adapters
    np.testing.assert_array_equal(base["bert.encoder.layer.0.attention.self.key.weight"], kernel.numpy().T)
