"""`kbert export` of a LoRA model: every format written from the merged weights (no adapter in
the files), answering as the unmerged Keras model within 1e-5 in float32."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS, EXPORT_TO_MODEL_ID_INPUTS
from tests.harness import minilm_vocab_backbone, random_inputs, randomize_like_trained

SEQ_LEN = 16

pytestmark = pytest.mark.slow  # a SavedModel and a .tflite (about 40 s); transformers in .venv-torch (14 s)


@pytest.fixture(scope="module")
def lora_classifier(tmp_path_factory):
    """A one-layer LoRA classifier whose adapters are non-zero (as after training), saved."""
    backbone = minilm_vocab_backbone()
    backbone.enable_lora(4, targets=["query", "value", "intermediate"], alpha=8)
    model = kb.BertClassifier(backbone, num_classes=2, label_names=["neg", "pos"])
    randomize_like_trained(model, seed=3, heads=("pooler/dense/kernel", "logits/kernel"))
    path = str(tmp_path_factory.mktemp("lora") / "lora.keras")
    model.save(path)
    return path


def test_export_answers_as_the_unmerged_model(lora_classifier, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["export", "--model", lora_classifier, "--output", str(out), "--seq-len", str(SEQ_LEN)]
    assert main([*argv, "--formats", "saved_model,tflite", "--quantizations", "float32"]) == 0
    assert "LoRA rank 4 on query, value, intermediate: merged into the kernels" in capsys.readouterr().err
    files = json.loads((out / "export.json").read_text())["files"]
    model = keras.saving.load_model(lora_classifier)
    x = random_inputs(batch=4, length=SEQ_LEN, vocabulary_size=30522, pad_last=5, seed=2)
    want = model.predict(x, verbose=0)["logits"]
    assert np.abs(want).max() > 0.5
    # The adapters matter: without them the logits differ by far more than the tolerance.
    plain = kb.models.merge_lora(model)
    for variable in plain.weights:
        if variable.path.endswith("/query/kernel"):
            variable.assign(next(v for v in model.weights if v.path == variable.path))
    assert np.abs(plain.predict(x, verbose=0)["logits"] - want).max() > 1e-2
    ids = {name: x[EXPORT_TO_MODEL_ID_INPUTS[name]] for name in EXPORT_ID_INPUTS}

    # Merged: the SavedModel holds no adapter (a [16, 4], [4, 16] or [4, 32] variable).
    saved = str(out / files["saved_model_ids"])
    shapes = [
        tuple(shape) for _, shape in tf.train.list_variables(os.path.join(saved, "variables", "variables"))
    ]
    assert (16, 16) in shapes and not [shape for shape in shapes if 4 in shape]
    got = tf.saved_model.load(saved).signatures["serving_default"](
        **{k: tf.constant(v) for k, v in ids.items()}
    )["logits"]
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5, rtol=0)

    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(out / files["tflite_float32"])).get_signature_runner(
        "serving_default"
    )
    got = runner(**ids)["logits"]
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_huggingface_export_answers_as_the_unmerged_model_in_transformers(lora_classifier, tmp_path, capsys):
    from tests.huggingface.transformers_side import check_loading_info, keras_outputs, transformers_outputs

    folder = str(tmp_path / "hf")
    assert main(["export", "--model", lora_classifier, "--output", folder, "--formats", "huggingface"]) == 0
    assert "merged into the kernels" in capsys.readouterr().err
    texts = ["a gripping , funny film", "dull and slow , with no story to speak of", "fine"]
    report, arrays = transformers_outputs(
        folder, {"forward": {"texts": texts, "texts_b": None, "max_length": SEQ_LEN}}, tmp_path
    )
    check_loading_info(report)
    want = keras_outputs(keras.saving.load_model(lora_classifier), arrays)["logits"]
    assert np.abs(want).max() > 0.5
    np.testing.assert_allclose(arrays["logits"], want, atol=1e-5, rtol=0)
