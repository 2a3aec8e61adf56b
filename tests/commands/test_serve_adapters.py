"""`kbert serve --model RUN_A --model RUN_B`: LoRA runs of one base, each a model of TF
Serving's REST API over one backbone, answering as its own merged export's SavedModels; a batch
mixing their requests is one backbone call; runs of different bases refused in one line."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from keras_bert_impl.tensor_names import SERVING_ENDPOINT
from keras_bert_impl_export.exporter import export_model
from keras_bert_impl_export.serve.lora_adapters import adapter_servables
from tests.export.test_serve import Server
from tests.harness import minilm_vocab_backbone, randomize_like_trained

pytestmark = pytest.mark.slow

TEXTS = ["a gripping, funny film", "a dull mess of a movie", "it is what it is"]
SEQ_LEN = 16


def _lora_run(folder, lora, head, base_seed=0, seed=1):
    """A run folder holding a LoRA classifier with trained-looking adapters and head."""
    backbone = minilm_vocab_backbone(seed=base_seed)
    backbone.enable_lora(**lora)
    classifier = randomize_like_trained(kb.BertClassifier(backbone, **head), seed=seed, heads=("logits",))
    os.makedirs(folder)
    classifier.save(os.path.join(folder, "model.keras"))
    return classifier


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapters")
    specs = {
        "sentiment": (dict(rank=2), dict(num_classes=2, label_names=["negative", "positive"])),
        "topic": (
            dict(rank=4, targets=["query", "value", "intermediate"]),
            dict(num_classes=2, pooling="mean", label_names=["news", "opinion"]),
        ),
    }
    models = {
        name: _lora_run(str(root / name), lora, head, seed=i + 1)
        for i, (name, (lora, head)) in enumerate(specs.items())
    }
    return root, models


def _own_export(model, folder, name):
    """The adapter's merged model exported as kbert export writes it; its text signature."""
    export_model(
        kb.models.merge_lora(model), folder, name=name, sequence_length=SEQ_LEN, formats=("saved_model",)
    )
    return tf.saved_model.load(os.path.join(folder, "serving", name, "1")).signatures["serving_default"]


def test_two_adapters_answer_as_their_own_merged_exports(runs, tmp_path):
    root, models = runs
    server = Server(*(f for name in models for f in ("--model", root / name)), "--seq-len", SEQ_LEN)
    try:
        for name, model in models.items():
            status, body = server.request("POST", f"/v1/models/{name}:predict", {"instances": TEXTS})
            assert status == 200, body
            expected = _own_export(model, str(tmp_path / name), name)(text=tf.constant(TEXTS))
            for key in ("logits", "probabilities", "top_score"):
                served = np.array([row[key] for row in body["predictions"]], "float32")
                np.testing.assert_allclose(served, expected[key].numpy(), atol=1e-5, rtol=0)
            assert [row["top_label"] for row in body["predictions"]] == [
                label.decode() for label in expected["top_label"].numpy()
            ]
            status, body = server.request("GET", f"/v1/models/{name}/metadata")
            assert status == 200 and body["model_spec"]["name"] == name
    finally:
        status, _, err = server.stop()
    assert status == 0, err[-3000:]
    assert "2 adapters over one backbone" in err


def test_adapters_of_different_bases_are_one_line_and_exit_2(runs, tmp_path, capsys):
    root, _ = runs
    keras.utils.clear_session()
    _lora_run(str(tmp_path / "other"), dict(rank=2), dict(num_classes=2), base_seed=7)
    code = main(
        ["serve", "--model", str(root / "sentiment"), "--model", str(tmp_path / "other"), "--port", "0"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("kbert serve: --model: classifiers[1] was not made from the same base as "), (
        err[-1]
    )
    assert "serve adapters of one base model together" in err[-1]


def test_a_batch_mixing_adapters_is_one_backbone_call_answering_each_as_alone(runs, tmp_path, monkeypatch):
    root, models = runs
    servables = {
        s.name: s
        for s in adapter_servables(
            ((name, model, SEQ_LEN, False) for name, model in models.items()),
            str(tmp_path),
            log=lambda _: None,
        )
    }
    batches = servables["sentiment"].batch_runner
    for kind in ("", "_ids"):  # the text signatures batch together, and the id ones
        assert servables[f"sentiment{kind}"].batch_group == servables[f"topic{kind}"].batch_group
    assert servables["sentiment"].batch_group != servables["sentiment_ids"].batch_group
    # Three requests, as the batcher concatenates them: sentiment, topic, sentiment.
    requests = [("sentiment", TEXTS[:2]), ("topic", TEXTS), ("sentiment", TEXTS[2:])]
    tagged = [
        batches.inputs(servables[name], {"text": np.array(texts, object)}, len(texts))
        for name, texts in requests
    ]
    batch = {key: np.concatenate([part[key] for part in tagged]) for key in tagged[0]}
    calls = []
    run = batches.bank.run
    monkeypatch.setattr(batches.bank, "run", lambda parts: calls.append(len(parts)) or run(parts))
    outputs = batches.run(SERVING_ENDPOINT, batch)
    assert calls == [2]  # one backbone call, for the rows of both adapters
    start = 0
    for name, texts in requests:
        alone = servables[name].run(SERVING_ENDPOINT, {"text": np.array(texts, object)})
        rows = slice(start, start + len(texts))
        np.testing.assert_allclose(outputs["logits"][rows], alone["logits"], atol=1e-5, rtol=0)
        assert list(outputs["top_label"][rows]) == list(alone["top_label"])
        assert list(outputs["label_names"][rows][0]) == list(alone["label_names"][0])
        start += len(texts)
    # The backbone ran as one graph for every batch size and width above (eagerly it took 1.5
    # times as long: bench/perf/serve_adapters_load.py), traced once.
    assert batches.bank.forward.experimental_get_tracing_count() == 1


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--name", "x"],
            "--name 'x' names one model; with several --model each is served under its folder's",
        ),
        (["--precision", "int8"], "several --model (LoRA adapters over one backbone) run fp32 on Keras"),
        # Each flag named alone, as given: the line once read "--precision int8 --runtime None".
        (["--precision", "bf16"], "kbert serve: --precision bf16: several --model (LoRA adapters"),
        (["--runtime", "litert"], "kbert serve: --runtime litert: several --model (LoRA adapters"),
        (
            ["--model", "{root}/nothing"],
            "--model '{root}/nothing': no kbert finetune run folder or .keras file",
        ),
        (["--model", "{root}/again/sentiment"], "--model: 3 folders, but 'sentiment' names more than one"),
    ],
)
def test_start_up_mistakes_with_several_models_are_one_line(runs, capsys, extra, message):
    root, _ = runs
    os.makedirs(root / "nothing", exist_ok=True)
    os.makedirs(root / "again" / "sentiment", exist_ok=True)
    (root / "again" / "sentiment" / "model.keras").touch()
    flags = ["--model", str(root / "sentiment"), "--model", str(root / "topic")]
    code = main(["serve", *flags, *(f.format(root=root) for f in extra), "--port", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and message.format(root=root) in err[0], err


def test_precision_auto_with_several_models_says_it_runs_fp32(runs, capsys, monkeypatch):
    """auto picks int8 or bf16 for one run on some CPUs; the adapters run fp32, and say so."""
    from keras_bert_impl_export.serve import lora_adapters

    def stop(runs, output, log):
        raise ValueError("stopped before loading")

    monkeypatch.setattr(lora_adapters, "adapter_servables", stop)
    root, _ = runs
    flags = ["--model", str(root / "sentiment"), "--model", str(root / "topic")]
    code = main(["serve", *flags, "--precision", "auto", "--port", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [
        "kbert serve: --precision auto: fp32 (several --model: LoRA adapters over one backbone run fp32 on "
        "Keras)",
        "kbert serve: --model: stopped before loading",
    ], err


def test_a_run_without_lora_among_several_is_one_line(runs, tmp_path, capsys):
    root, _ = runs
    os.makedirs(tmp_path / "full")
    kb.BertClassifier(minilm_vocab_backbone(), num_classes=2).save(str(tmp_path / "full" / "model.keras"))
    code = main(
        ["serve", "--model", str(root / "sentiment"), "--model", str(tmp_path / "full"), "--port", "0"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith(f"kbert serve: --model '{tmp_path / 'full'}' has no LoRA adapters"), err[-1]
