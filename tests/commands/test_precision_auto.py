"""`--precision auto` of `kbert predict` and `kbert evaluate` (issue 33): one line on stderr naming
the choice and the CPU features that decided it, then a run in that precision; an explicit bf16
or int8 on a CPU without the feature it needs says it is expected to be slower, and runs. The CPU
is this machine's (its real /proc/cpuinfo) or one of the table's, put in place of it."""

import csv
import json

import keras
import pytest

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from keras_bert_impl.cpu_features import CpuFeatures
from keras_bert_impl.precision_choice import INT8_GAIN_AVX2, choose_precision, slower_here

SENTENCES = ["a gripping , funny film", "nothing happens for two hours"]
AVX2 = CpuFeatures("AMD EPYC 7B13", ["avx", "avx2", "fma"])
VNNI_BF16 = CpuFeatures("AMD EPYC 9B14", ["avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16"])


@pytest.fixture(scope="module")
def heads(tiny_init, tmp_path_factory):
    """A classifier and a tagger .keras on the one-layer test backbone."""
    folder = tmp_path_factory.mktemp("auto")
    keras.utils.set_random_seed(0)
    classifier = str(folder / "classifier.keras")
    kb.BertClassifier(keras.saving.load_model(tiny_init), num_classes=2, label_names=["-1", "1"]).save(
        classifier
    )
    tagger = str(folder / "tagger.keras")
    kb.BertTokenClassifier(
        keras.saving.load_model(tiny_init), num_classes=3, label_names=["O", "B-X", "I-X"]
    ).save(tagger)
    return {"classification": classifier, "tagging": tagger}


def _on_cpu(monkeypatch, features):
    monkeypatch.setattr(CpuFeatures, "of_this_machine", classmethod(lambda cls, cpuinfo=None: features))


def _predict(capsys, *argv):
    capsys.readouterr()
    assert main(["predict", *argv, "--json"]) == 0
    out, err = capsys.readouterr()
    return [json.loads(line) for line in out.splitlines()], [
        line for line in err.splitlines() if line.strip()
    ]


def test_auto_on_this_machine_says_its_choice_once_and_runs(heads, capsys):
    features = CpuFeatures.of_this_machine()
    precision, reason = choose_precision(features, "classification")
    outputs, err = _predict(capsys, "--model", heads["classification"], "--precision", "auto", *SENTENCES)
    assert err == [
        f"kbert predict: --precision auto: {precision} on {features.describe()}, because {reason}."
    ]
    assert slower_here(precision, features) is None
    fp32, _ = _predict(capsys, "--model", heads["classification"], *SENTENCES)
    assert [o["label"] for o in outputs] == [o["label"] for o in fp32]
    if precision == "fp32":
        assert outputs == fp32


def test_auto_runs_what_it_chose(heads, capsys, monkeypatch):
    """On a VNNI/BF16 CPU: int8 for the classifier (the same labels as fp32 and different
    probabilities: int8 ran), bf16 for the tagger; on an AVX2-only CPU int8 for the classifier and fp32
    for the tagger; on a CPU of unknown features fp32, the same numbers as fp32."""
    fp32, _ = _predict(capsys, "--model", heads["classification"], *SENTENCES)
    _on_cpu(monkeypatch, VNNI_BF16)
    int8, err = _predict(capsys, "--model", heads["classification"], "--precision", "auto", *SENTENCES)
    assert err == [
        "kbert predict: --precision auto: int8 on AMD EPYC 9B14 (AVX2, AVX-512, VNNI, BF16; no AMX), "
        "because it has VNNI (int8 ran 3.24x fp32 on an AVX512-VNNI CPU)."
    ]
    assert [o["label"] for o in int8] == [o["label"] for o in fp32]
    assert [o["probability"] for o in int8] != [o["probability"] for o in fp32]
    _, err = _predict(capsys, "--model", heads["tagging"], "--precision", "auto", "the cat sat")
    assert err == [
        "kbert predict: --precision auto: bf16 on AMD EPYC 9B14 (AVX2, AVX-512, VNNI, BF16; no AMX), "
        "because it has BF16 (bf16 ran 1.44x fp32 on an AVX512-BF16 CPU; int8 is for classifiers, this "
        "model is tagging)."
    ]
    _on_cpu(monkeypatch, AVX2)
    avx2, err = _predict(capsys, "--model", heads["classification"], "--precision", "auto", *SENTENCES)
    assert err == [
        "kbert predict: --precision auto: int8 on AMD EPYC 7B13 (AVX2; no AVX-512, VNNI, BF16 or AMX), "
        f"because it has AVX2 ({INT8_GAIN_AVX2})."
    ]
    assert avx2 == int8  # the same int8 file and kernels as on the VNNI CPU's run above
    _, err = _predict(capsys, "--model", heads["tagging"], "--precision", "auto", "the cat sat")
    assert len(err) == 1 and "auto: fp32 on AMD EPYC 7B13" in err[0] and "this model is tagging" in err[0]
    _on_cpu(monkeypatch, CpuFeatures(None, []))
    same, err = _predict(capsys, "--model", heads["classification"], "--precision", "auto", *SENTENCES)
    assert same == fp32 and len(err) == 1
    assert "auto: fp32 on " in err[0] and "it has no AVX2 or VNNI" in err[0]


def test_explicit_bf16_without_its_feature_warns_in_one_line_and_runs(heads, capsys, monkeypatch):
    fp32, _ = _predict(capsys, "--model", heads["classification"], *SENTENCES)
    _on_cpu(monkeypatch, AVX2)
    outputs, err = _predict(capsys, "--model", heads["classification"], "--precision", "bf16", *SENTENCES)
    assert err == [
        "kbert predict: --precision bf16 is expected to be slower than fp32 here: this CPU has no BF16 "
        "(bf16 ran 0.70x fp32 on an AVX2-only CPU); running bf16 as asked."
    ]
    assert [o["label"] for o in outputs] == [o["label"] for o in fp32]
    # int8 ran faster than fp32 on the AVX2-only CPU too: no line.
    outputs, err = _predict(capsys, "--model", heads["classification"], "--precision", "int8", *SENTENCES)
    assert err == [] and [o["label"] for o in outputs] == [o["label"] for o in fp32]
    # With the feature, no line; fp32 never has one.
    _on_cpu(monkeypatch, VNNI_BF16)
    for precision in ("fp32", "bf16"):
        assert (
            _predict(capsys, "--model", heads["classification"], "--precision", precision, *SENTENCES)[1]
            == []
        )


def test_explicit_bf16_on_this_machine(heads, capsys):
    """This machine's real features: a warning exactly when it has no BF16."""
    features = CpuFeatures.of_this_machine()
    _, err = _predict(capsys, "--model", heads["classification"], "--precision", "bf16", *SENTENCES)
    if features.has("BF16"):
        assert err == []
    else:
        assert err == [
            f"kbert predict: --precision bf16 is expected to be slower than fp32 here: "
            f"{slower_here('bf16', features)}; running bf16 as asked."
        ]


def test_evaluate_takes_auto(heads, mr_files, tmp_path, capsys, monkeypatch):
    _, dev = mr_files
    data = tmp_path / "dev.csv"
    with open(dev, encoding="utf-8", newline="") as f, open(data, "w", encoding="utf-8", newline="") as out:
        csv.writer(out).writerows([("label", "text")] + list(csv.reader(f))[:8])
    _on_cpu(monkeypatch, AVX2)
    capsys.readouterr()
    assert (
        main(
            [
                "evaluate",
                "--model",
                heads["classification"],
                "--data",
                str(data),
                "--precision",
                "auto",
                "--json",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert json.loads(out)["examples"] == 8
    assert (
        err.count("--precision auto") == 1
        and "kbert evaluate: --precision auto: int8 on AMD EPYC 7B13" in err
    )


def test_bad_precision_keeps_the_argparse_error(heads, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "--model", heads["classification"], "--precision", "fastest", "a film"])
    assert exit_.value.code == 2
    assert (
        "argument --precision: --precision must be one of ['fp32', 'bf16', 'int8', 'auto']. "
        "Received: --precision='fastest'"
    ) in capsys.readouterr().err
