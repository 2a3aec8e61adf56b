"""`kbert export --formats huggingface` and `export_huggingface` without PyTorch: the real
MiniLM round trip (bit for bit), what config.json says of each head, and the refusals."""

import os

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file

import keras_bert_impl as kb
from keras_bert_impl.checkpoints import convert_checkpoint
from keras_bert_impl.cli import main
from keras_bert_impl_export.huggingface import NotExpressibleError, transformers_model
from tests.conftest import DATA

MINILM = os.path.join(DATA, "minilm")
# A vocabulary small enough for models that are saved and loaded in a few seconds.
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "film", "dull", "##s"]


@pytest.fixture(scope="module")
def minilm_export(minilm_keras, tmp_path_factory):
    """`kbert export --formats huggingface` of the real MiniLM converted by `kbert convert`."""
    output = str(tmp_path_factory.mktemp("hf") / "minilm")
    assert main(["export", "--model", minilm_keras, "--output", output, "--formats", "huggingface"]) == 0
    return output


def test_the_minilm_round_trip_is_bit_identical(minilm_export, minilm_keras):
    """Hugging Face folder -> kbert convert -> kbert export: the same tensors (names, dtypes,
    shapes, bytes; the position_ids buffer included); and the export imports to the same weights."""
    original = load_file(os.path.join(MINILM, "model.safetensors"))
    exported = load_file(os.path.join(minilm_export, "model.safetensors"))
    assert sorted(exported) == sorted(original) and len(original) == 104
    for name, value in original.items():
        assert (exported[name].dtype, exported[name].shape) == (value.dtype, value.shape), name
        assert exported[name].tobytes() == value.tobytes(), name
    reimported, report = convert_checkpoint(minilm_export, "huggingface", with_heads=False)
    assert report.ok and not report.unexpected
    source = keras.saving.load_model(minilm_keras)
    assert [w.path for w in reimported.weights] == [w.path for w in source.weights]
    for ours, theirs in zip(reimported.get_weights(), source.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
    assert reimported.vocabulary == source.vocabulary and reimported.lowercase is True


def test_the_folder_holds_what_transformers_reads(minilm_export):
    names = sorted(os.listdir(minilm_export))
    assert names == [
        "README.md",
        "config.json",
        "model.safetensors",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    import json

    with open(os.path.join(minilm_export, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(MINILM, "config.json"), encoding="utf-8") as f:
        original = json.load(f)
    for key in (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "max_position_embeddings",
        "type_vocab_size",
        "layer_norm_eps",
        "pad_token_id",
    ):
        assert config[key] == original[key], key
    assert config["architectures"] == ["BertModel"]
    with open(os.path.join(minilm_export, "README.md"), encoding="utf-8") as f:
        card = f.read()
    # The deliberate tokenizer differences (tests/fixtures/tokenization_hard_cases.json, expect: google).
    for words in (
        "_truncate_seq_pair",
        "Literal `[CLS]`",
        "Private-use",
        "U+2B820",
        "U+07FD",
        "U+0890",
        "U+166D",
        "U+1734",
        "U+2E55",
    ):
        assert words in card, words
    with (
        open(os.path.join(minilm_export, "vocab.txt"), encoding="utf-8") as f,
        open(os.path.join(MINILM, "vocab.txt"), encoding="utf-8") as g,
    ):
        assert f.read() == g.read()


def _backbone(**overrides):
    backbone = kb.BertBackbone.from_preset(
        "bert_tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=32, **overrides
    )
    backbone.set_vocabulary(VOCABULARY, lowercase=True)
    return backbone


def test_config_of_each_head():
    classifier = transformers_model(
        kb.BertClassifier(_backbone(), 3, multi_label=True, label_names=["x", "y", "z"])
    )
    assert classifier.architecture == "BertForSequenceClassification"
    assert classifier.config["problem_type"] == "multi_label_classification"
    assert (
        classifier.config["id2label"] == {"0": "x", "1": "y", "2": "z"}
        and classifier.config["label2id"]["z"] == 2
    )
    assert classifier.tensors["classifier.weight"].shape == (3, 128)
    tagger = transformers_model(kb.BertTokenClassifier(_backbone(), 2, label_names=["NN", "VB"]))
    assert tagger.architecture == "BertForTokenClassification" and tagger.config["id2label"]["1"] == "VB"
    spans = transformers_model(kb.BertSpanLabeler(_backbone()))
    assert spans.architecture == "BertForQuestionAnswering" and spans.tensors["qa_outputs.weight"].shape == (
        2,
        128,
    )
    assert (
        "id2label" not in spans.config and len(spans.notes) == 2
    )  # the pooler and the -1e9 on padding, in the card
    assert not [name for name in {**tagger.tensors, **spans.tensors} if "pooler" in name]
    pretrainer = transformers_model(kb.BertPretrainer(_backbone()))
    assert pretrainer.architecture == "BertForPreTraining"
    assert {"cls.predictions.bias", "cls.seq_relationship.weight", "bert.pooler.dense.weight"} <= set(
        pretrainer.tensors
    )
    tanh = transformers_model(_backbone(activation="gelu_approximate"))
    assert tanh.config["hidden_act"] == "gelu_new"
    # Quantization-aware: the float classifier it wraps (this was
    # refused with advice that led to another refusal).
    float_head = kb.BertClassifier(_backbone(), 2, label_names=["neg", "pos"])
    qat = transformers_model(kb.QuantizationAwareClassifier(float_head))
    assert qat.architecture == "BertForSequenceClassification" and "quantization-aware" in qat.notes[0]
    np.testing.assert_array_equal(qat.tensors["classifier.weight"], float_head.output_dense.kernel.numpy().T)


def _quantized(model):
    model.quantize("int8")
    return model


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: kb.BertClassifier(_backbone(), 2, pooling="mean"), "pooling='mean'"),
        (lambda: _backbone(position_embedding="sinusoidal"), "position_embedding='sinusoidal'"),
        (lambda: kb.BertEmbedder(_backbone()), "BertEmbedder"),
        (lambda: _quantized(kb.BertClassifier(_backbone(), 2)), "int8"),
    ],
)
def test_what_transformers_cannot_express_is_refused(make, words):
    with pytest.raises(NotExpressibleError, match=words.replace("(", r"\(")):
        transformers_model(make())


def _refused(capsys, args, words):
    assert main(["export", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err) and words in err[-1], err


def test_bad_input_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys):
    mean = str(tmp_path / "mean.keras")
    kb.BertClassifier(_backbone(), 2, pooling="mean").save(mean)
    bare = _backbone()
    bare.vocabulary = None
    no_vocabulary = str(tmp_path / "bare.keras")
    bare.save(no_vocabulary)
    good = str(tmp_path / "good.keras")
    kb.BertTokenClassifier(_backbone(), 2).save(good)
    before = sorted(os.listdir(tmp_path))
    out = str(tmp_path / "out")
    _refused(capsys, ["--model", mean, "--output", out, "--formats", "huggingface"], "pooling='mean'")
    _refused(capsys, ["--model", no_vocabulary, "--output", out, "--formats", "huggingface"], "no vocabulary")
    _refused(capsys, ["--model", good, "--output", out, "--formats", "huggingface,tflite"], "given alone")
    # The other formats' flags: dropped without a word before (a
    # --validation file that did not exist, exit 0).
    _refused(
        capsys,
        [
            "--model",
            good,
            "--output",
            out,
            "--formats",
            "huggingface",
            "--validation",
            "missing.csv",
            "--seq-len",
            "16",
            "--name",
            "foo",
        ],
        "--formats huggingface writes the float model and its tokenizer files; it takes no --validation, "
        "--name, --seq-len. Leave them out",
    )
    _refused(
        capsys,
        ["--model", good, "--output", out, "--formats", "sentence_transformers", "--static-lengths", "8"],
        "it takes no --static-lengths",
    )
    assert sorted(os.listdir(tmp_path)) == before  # no output, no half-written folder beside it
    os.makedirs(out)
    with open(os.path.join(out, "keep.txt"), "w") as f:
        f.write("mine")
    _refused(capsys, ["--model", good, "--output", out, "--formats", "huggingface"], "--overwrite")
    assert os.listdir(out) == ["keep.txt"] and sorted(os.listdir(tmp_path)) == sorted(before + ["out"])
    assert main(["export", "--model", good, "--output", out, "--formats", "huggingface", "--overwrite"]) == 0
    assert "keep.txt" not in os.listdir(out) and "model.safetensors" in os.listdir(out)
