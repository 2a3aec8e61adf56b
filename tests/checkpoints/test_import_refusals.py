"""What the importers used to get wrong without a word, on folders written by our own
Hugging Face export (each then changed as a real checkpoint can differ): an untied MLM decoder
(its logits were another model's), tokenizer settings BertPreprocessor cannot honour, a token-
level head's checkpoint without a pooler (refused, so our own exports did not come back), a
vocabulary with a token twice; and the damaged or foreign files that ended in a traceback
(a damaged Google checkpoint: test_google_tf1.py)."""

import json

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import keras_bert_impl as kb
from keras_bert_impl.checkpoints import CheckpointMismatchError, convert_checkpoint
from keras_bert_impl_export.huggingface.export_huggingface import export_huggingface

# A vocabulary small enough for models saved and loaded in a few seconds.
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "film", "dull", "##s"]
IDS = np.array([[2, 5, 6, 7, 3, 0]], "int32")


def _backbone():
    keras.utils.set_random_seed(0)
    backbone = kb.BertBackbone.from_preset(
        "bert_tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=32
    )
    backbone.set_vocabulary(VOCABULARY, lowercase=True)
    return backbone


def _inputs():
    return {"token_ids": IDS, "segment_ids": np.zeros_like(IDS), "padding_mask": (IDS > 0).astype("int32")}


def _exported(model, folder):
    export_huggingface(model, str(folder))
    return folder


def _edit_json(path, **changes):
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, **changes}), encoding="utf-8")


def test_an_untied_mlm_decoder_is_refused_with_the_heads_and_named_without(tmp_path):
    folder = _exported(kb.BertPretrainer(_backbone()), tmp_path / "pretrainer")
    tensors = load_file(folder / "model.safetensors")
    embeddings = tensors["bert.embeddings.word_embeddings.weight"]
    # Tied, as our export and BERT's checkpoints are: loads with its heads.
    tensors["cls.predictions.decoder.weight"] = embeddings.copy()
    save_file(tensors, folder / "model.safetensors")
    model, _ = convert_checkpoint(str(folder), format="huggingface")
    assert isinstance(model, kb.BertPretrainer)
    tensors["cls.predictions.decoder.weight"] = embeddings + np.float32(0.5)
    save_file(tensors, folder / "model.safetensors")
    _edit_json(folder / "config.json", tie_word_embeddings=False)
    with pytest.raises(
        ValueError,
        match=r"cls.predictions.decoder.weight is not the word embeddings \(the MLM "
        r"decoder is untied: tie_word_embeddings=False in config.json\).*--backbone-only",
    ):
        convert_checkpoint(str(folder), format="huggingface")
    backbone, report = convert_checkpoint(str(folder), format="huggingface", with_heads=False)
    assert isinstance(backbone, kb.BertBackbone)
    assert (
        "cls.predictions.decoder.weight",
        "the MLM decoder (untied here), left out with the heads",
    ) in report.ignored
    # The heads left out, under the file's own names.
    assert report.unexpected == sorted(n for n in tensors if n.startswith("cls.") and "decoder" not in n)


def test_tokenizer_settings_the_preprocessor_cannot_honour_are_refused(tmp_path):
    folder = _exported(_backbone(), tmp_path / "backbone")
    config = folder / "tokenizer_config.json"
    original = config.read_text(encoding="utf-8")
    for changes, said in (
        ({"strip_accents": False}, "strip_accents=False with do_lower_case=True"),
        ({"tokenize_chinese_chars": False}, "tokenize_chinese_chars=False"),
        ({"do_basic_tokenize": False}, "do_basic_tokenize=False"),
    ):
        config.write_text(original, encoding="utf-8")
        _edit_json(config, **changes)
        with pytest.raises(ValueError, match=rf"{config} asks for {said}, which BertPreprocessor cannot do"):
            convert_checkpoint(str(folder), format="huggingface")
    config.write_text(original, encoding="utf-8")
    _edit_json(config, strip_accents=None)  # transformers' default: follow do_lower_case
    assert convert_checkpoint(str(folder), format="huggingface")[0].lowercase is True


def test_a_token_level_heads_checkpoint_comes_back_with_the_pooler_initialised(tmp_path):
    tagger = kb.BertTokenClassifier(_backbone(), num_classes=2, label_names=["O", "X"])
    folder = _exported(tagger, tmp_path / "tagger")
    assert not [name for name in load_file(folder / "model.safetensors") if "pooler" in name]
    backbone, report = convert_checkpoint(str(folder), format="huggingface", with_heads=False)
    assert report.missing == [] and report.initialised == [
        "bert/pooler/dense/kernel",
        "bert/pooler/dense/bias",
    ]
    assert (
        "initialised:    2 (bert/pooler/dense/kernel, bert/pooler/dense/bias: not in the checkpoint"
        in report.summary()
    )
    np.testing.assert_array_equal(
        backbone(_inputs())["sequence_output"], tagger.backbone(_inputs())["sequence_output"]
    )
    # One pooler tensor without the other is a checkpoint that does not fit.
    tensors = load_file(folder / "model.safetensors")
    tensors["bert.pooler.dense.bias"] = np.zeros(128, "float32")
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(
        CheckpointMismatchError, match=r"Missing from the checkpoint \(1\): bert/pooler/dense/kernel"
    ):
        convert_checkpoint(str(folder), format="huggingface", with_heads=False)


def test_damaged_files_are_named(tmp_path):
    folder = _exported(_backbone(), tmp_path / "backbone")
    config = folder / "config.json"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('"', "", 1), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{config} is not valid JSON \(Expecting"):
        convert_checkpoint(str(folder), format="huggingface")
    config.write_text(text, encoding="utf-8")
    vocab = folder / "vocab.txt"
    vocab.write_text(vocab.read_text(encoding="utf-8") + "film\n", encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=rf"{vocab} holds 1 token\(s\) more than once \('film' on lines \[7, 10\]\): "
        r"each token needs one id",
    ):
        convert_checkpoint(str(folder), format="huggingface")


def test_a_model_garden_config_with_a_foreign_key_is_named(tmp_path):
    from official.nlp.modeling import networks  # the reference implementation the format belongs to

    encoder = networks.BertEncoderV2(
        vocab_size=len(VOCABULARY),
        hidden_size=16,
        num_layers=1,
        num_attention_heads=2,
        inner_dim=32,
        max_sequence_length=16,
    )
    dummy = np.zeros((1, 2), "int32")
    encoder(dict(input_word_ids=dummy, input_mask=dummy + 1, input_type_ids=dummy))
    import tensorflow as tf

    tf.train.Checkpoint(encoder=encoder).save(str(tmp_path / "ckpt"))
    (tmp_path / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
    (tmp_path / "encoder_config.json").write_text(
        json.dumps({"vocab_size": len(VOCABULARY), "hidden_sizes": 16, "num_layers": 1}), encoding="utf-8"
    )
    with pytest.raises(
        ValueError,
        match=r"encoder_config.json is not a BertEncoderV2 config \(.*hidden_sizes.*\): it "
        r"must hold the encoder's get_config\(\)",
    ):
        convert_checkpoint(str(tmp_path), format="model-garden")


def test_a_decoder_config_is_refused(tmp_path):
    """transformers' BertModel with is_decoder=True attends causally (BertLMHeadModel); BertBackbone
    attends both ways. Imported as it was, its sequence output was up to 1.4e-2 from transformers'
    on a 2-layer model of hidden size 16, with no word."""
    folder = _exported(_backbone(), tmp_path / "backbone")
    _edit_json(folder / "config.json", is_decoder=True)
    with pytest.raises(
        ValueError,
        match=rf"{folder / 'config.json'}: is_decoder=True: this BERT attends causally "
        r"\(a decoder, as BertLMHeadModel\); BertBackbone attends in both directions",
    ):
        convert_checkpoint(str(folder), format="huggingface")
    _edit_json(folder / "config.json", is_decoder=False, add_cross_attention=True)
    with pytest.raises(ValueError, match=r"add_cross_attention=True"):
        convert_checkpoint(str(folder), format="huggingface")


def test_other_architectures_are_named_by_their_model_type(tmp_path):
    """A DistilBERT config.json was refused for 'missing fields [hidden_size, ...]; is this a BERT
    config?', which hides what it is."""
    folder = tmp_path / "distilbert"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps(
            {  # transformers' DistilBertConfig, as save_pretrained writes it
                "model_type": "distilbert",
                "vocab_size": 30522,
                "dim": 768,
                "n_layers": 6,
                "n_heads": 12,
                "hidden_dim": 3072,
                "max_position_embeddings": 512,
                "activation": "gelu",
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(
        ValueError, match=r"config.json: model_type='distilbert'; only BERT \('bert'\) checkpoints"
    ):
        convert_checkpoint(str(folder), format="huggingface")


def test_a_sharded_checkpoint_loads_and_a_damaged_index_is_named(tmp_path):
    """transformers' sharded layout: model.safetensors.index.json maps each tensor to its shard.
    An index without its weight_map was a KeyError traceback."""
    backbone = _backbone()
    folder = _exported(backbone, tmp_path / "sharded")
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, folder / shard)
    index = folder / "model.safetensors.index.json"
    index.write_text(
        json.dumps({"metadata": {}, "weight_map": {k: s for s, keys in shards.items() for k in keys}})
    )
    model, report = convert_checkpoint(str(folder), format="huggingface")
    assert report.source == str(index) and report.ok
    np.testing.assert_array_equal(model(_inputs())["sequence_output"], backbone(_inputs())["sequence_output"])
    index.write_text(json.dumps({"metadata": {}}))
    with pytest.raises(
        ValueError,
        match=rf"{index} has no weight_map \(tensor name -> shard file\): it is not "
        r"transformers' sharded-checkpoint index",
    ):
        convert_checkpoint(str(folder), format="huggingface")
    index.write_text(
        json.dumps({"metadata": {}, "weight_map": {k: s for s, keys in shards.items() for k in keys}})
    )
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(
        FileNotFoundError,
        match=rf"{index} names the shard model-00002-of-00002.safetensors, which is "
        r"not in .*sharded: copy every shard",
    ):
        convert_checkpoint(str(folder), format="huggingface")


@pytest.mark.parametrize("text,kind", [("[1, 2]", "list"), ("null", "null")])
def test_a_config_that_is_not_an_object_is_named(tmp_path, text, kind):
    """Valid JSON that is not an object of fields was an AttributeError or TypeError traceback."""
    folder = _exported(_backbone(), tmp_path / "backbone")
    (folder / "config.json").write_text(text, encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=rf"{folder / 'config.json'} holds a JSON {kind}, not an object of fields: "
        r"is it the checkpoint's own config file\?",
    ):
        convert_checkpoint(str(folder), format="huggingface")
    google = tmp_path / "google"
    google.mkdir()
    (google / "bert_config.json").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"bert_config.json holds a JSON {kind}, not an object"):
        convert_checkpoint(str(google), format="google")


def test_a_config_with_fewer_layers_than_the_weights_is_refused(tmp_path):
    """num_hidden_layers=1 for 2-layer weights gave a 1-layer model, the rest 'unexpected', exit 0."""
    folder = _exported(_backbone(), tmp_path / "backbone")
    _edit_json(folder / "config.json", num_hidden_layers=1)
    with pytest.raises(CheckpointMismatchError, match=r"no place for \(16\): bert/encoder/layer_1/"):
        convert_checkpoint(str(folder), format="huggingface")


def test_a_vocabulary_of_another_size_names_both_files(tmp_path):
    """vocab.txt with more lines than the config's vocab_size (NVIDIA's BERT pads the table to
    30528 rows for a 30522-token vocabulary, the other way round) was 'The vocabulary has 11 tokens
    but the model's vocabulary_size is 9', naming neither file."""
    folder = _exported(_backbone(), tmp_path / "backbone")
    vocab = folder / "vocab.txt"
    vocab.write_text(vocab.read_text(encoding="utf-8") + "dog\ncat\n", encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=rf"{vocab} has 11 tokens but {folder / 'config.json'} says vocab_size=9 "
        r"\(the rows of the token embedding\): use the vocab.txt that belongs to these "
        r"weights",
    ):
        convert_checkpoint(str(folder), format="huggingface")


def test_integer_weights_are_refused(tmp_path):
    """A tensor of integers (a quantized checkpoint's int8 weights, whose scales sit in other
    tensors) was cast to float and loaded as if it were the weight, reported ok."""
    folder = _exported(_backbone(), tmp_path / "backbone")
    tensors = load_file(folder / "model.safetensors")
    name = "encoder.layer.0.attention.self.query.weight"
    tensors[name] = np.clip(np.round(tensors[name] * 127 / np.abs(tensors[name]).max()), -127, 127).astype(
        "int8"
    )
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(
        ValueError,
        match=r"model.safetensors: bert/encoder/layer_0/attention/self/query/kernel holds int8 "
        r"values where the model holds floats: a quantized checkpoint cannot be imported",
    ):
        convert_checkpoint(str(folder), format="huggingface")


def test_a_folder_of_another_format_says_which(tmp_path):
    """A Hugging Face folder under --format google or model-garden was only 'No bert_config.json'."""
    folder = _exported(_backbone(), tmp_path / "backbone")
    for wrong, missing in (("google", "bert_config.json"), ("model-garden", "encoder_config.json")):
        with pytest.raises(
            FileNotFoundError,
            match=rf"No {missing} in {folder}: .* It holds config.json and "
            r"model.safetensors, a Hugging Face folder: use --format huggingface",
        ):
            convert_checkpoint(str(folder), format=wrong)
    (folder / "config.json").rename(folder / "bert_config.json")
    with pytest.raises(
        FileNotFoundError,
        match=rf"No config.json in {folder}: .* It holds bert_config.json, Google's "
        r"release: use --format google",
    ):
        convert_checkpoint(str(folder), format="huggingface")


def test_config_values_of_the_wrong_kind_are_named(tmp_path):
    """layer_norm_eps="x" was a TypeError traceback from inside TransformerEncoder.call; a size of
    the wrong kind was named by BertBackbone's argument (hidden_dim='16'), not the config's field."""
    folder = _exported(_backbone(), tmp_path / "backbone")
    config = folder / "config.json"
    original = config.read_text(encoding="utf-8")
    for changes, said in (
        ({"layer_norm_eps": "x"}, r"layer_norm_eps='x' must be a number in \(0, 1\)"),
        ({"hidden_dropout_prob": 1.5}, r"hidden_dropout_prob=1.5 must be a number in \[0, 1\)"),
        ({"hidden_size": "128"}, r"hidden_size='128' must be a positive integer"),
    ):
        config.write_text(original, encoding="utf-8")
        _edit_json(config, **changes)
        with pytest.raises(ValueError, match=rf"{config}: {said}"):
            convert_checkpoint(str(folder), format="huggingface")


def test_with_heads_true_needs_heads(tmp_path):
    """with_heads=True on a checkpoint without MLM/NSP heads returned a BertBackbone, as None does."""
    folder = _exported(_backbone(), tmp_path / "backbone")
    with pytest.raises(
        ValueError,
        match=rf"with_heads=True, but {folder / 'model.safetensors'} has no MLM or NSP head "
        r"\(cls/predictions/\*, cls/seq_relationship/\*\): pass with_heads=None",
    ):
        convert_checkpoint(str(folder), format="huggingface", with_heads=True)
    with pytest.raises(
        ValueError, match=r"with_heads must be None, True or False. Received: with_heads='yes'"
    ):
        convert_checkpoint(str(folder), format="huggingface", with_heads="yes")
    with pytest.raises(
        ValueError, match=r"with_heads=True, but a Model Garden encoder checkpoint has no MLM or NSP"
    ):
        convert_checkpoint(str(folder), format="model-garden", with_heads=True)


def test_the_mlm_bias_under_the_decoders_name(tmp_path):
    """transformers ties cls.predictions.bias to cls.predictions.decoder.bias, and a file may hold
    the tensor under either name: under the decoder's alone it was 'ignored' as 'the same tensor as
    cls.predictions.bias' and the import failed for want of cls/predictions/output_bias; under both,
    unequal, the decoder's was dropped on that same word."""
    keras.utils.set_random_seed(1)
    pretrainer = kb.BertPretrainer(_backbone())
    pretrainer.masked_lm_head.output_bias.assign(np.linspace(-1, 1, len(VOCABULARY)).astype("float32"))
    folder = _exported(pretrainer, tmp_path / "pretrainer")
    tensors = load_file(folder / "model.safetensors")
    tensors["cls.predictions.decoder.bias"] = tensors.pop("cls.predictions.bias")
    save_file(tensors, folder / "model.safetensors")
    model, report = convert_checkpoint(str(folder), format="huggingface")
    np.testing.assert_array_equal(
        model.masked_lm_head.output_bias.numpy(), pretrainer.masked_lm_head.output_bias.numpy()
    )
    assert any(c == "cls.predictions.decoder.bias" for c, _, _ in report.mapped)
    assert "cls.predictions.decoder.bias" not in [name for name, _ in report.ignored]
    tensors["cls.predictions.bias"] = tensors["cls.predictions.decoder.bias"] + np.float32(1)
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(
        ValueError,
        match=r"model.safetensors: cls.predictions.decoder.bias differs from "
        r"cls.predictions.bias, which transformers ties to it",
    ):
        convert_checkpoint(str(folder), format="huggingface")
    assert isinstance(
        convert_checkpoint(str(folder), format="huggingface", with_heads=False)[0], kb.BertBackbone
    )
