"""Import Hugging Face BERT weights (config.json + model.safetensors + vocab.txt)."""

import os
import re

import numpy as np

from keras_bert_impl.tokenization.vocabulary import vocabulary_is_uncased
from keras_bert_impl.checkpoints.import_report import (
    BERT_CONFIG_ARGUMENTS,
    BERT_CONFIG_NUMBERS,
    BERT_CONFIG_REQUIRED,
    backbone_kwargs_from_fields,
    check_config_numbers,
    read_format_config,
    read_json_file,
)
from keras_bert_impl.checkpoints.weight_map import (
    backbone_variables,
    build_and_load,
    pretrainer_variables,
    read_checkpoint_vocabulary,
)

REQUIRED_FIELDS = BERT_CONFIG_REQUIRED
NUMBER_FIELDS = {**BERT_CONFIG_NUMBERS, "layer_norm_eps": "epsilon"}
# In transformers, "gelu" is the exact erf form; these are its tanh variants.
HIDDEN_ACT = {
    "gelu": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}

_LAYER = "encoder.layer.{layer}."
_G_LAYER = "bert/encoder/layer_{layer}/"


def _dense(name, google):
    """A Linear/Dense layer's two rules: PyTorch's [out, in] weight is Google's [in, out] kernel."""
    return [(name + ".weight", google + "/kernel", True), (name + ".bias", google + "/bias", False)]


def _layer_norm(name, google):
    return [(name + ".weight", google + "/gamma", False), (name + ".bias", google + "/beta", False)]


# (Hugging Face name without the "bert." prefix, Google name, transpose), written once and
# read both ways: the importer matches Hugging Face names, the exporter Google names
# (`{layer}` is a layer index, `{proj}` query, key or value). PyTorch's Linear stores
# weight as [out, in]; Google and Keras use [in, out]. LayerNorm's old names gamma/beta
# are read as weight/bias (`_LAYER_NORM_ALIASES`) and written as weight/bias.
_RULES = [
    ("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False),
    ("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", False),
    ("embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", False),
    *_layer_norm("embeddings.LayerNorm", "bert/embeddings/LayerNorm"),
    *_dense(_LAYER + "attention.self.{proj}", _G_LAYER + "attention/self/{proj}"),
    *_dense(_LAYER + "attention.output.dense", _G_LAYER + "attention/output/dense"),
    *_layer_norm(_LAYER + "attention.output.LayerNorm", _G_LAYER + "attention/output/LayerNorm"),
    *_dense(_LAYER + "intermediate.dense", _G_LAYER + "intermediate/dense"),
    *_dense(_LAYER + "output.dense", _G_LAYER + "output/dense"),
    *_layer_norm(_LAYER + "output.LayerNorm", _G_LAYER + "output/LayerNorm"),
    *_dense("pooler.dense", "bert/pooler/dense"),
    *_dense("cls.predictions.transform.dense", "cls/predictions/transform/dense"),
    *_layer_norm("cls.predictions.transform.LayerNorm", "cls/predictions/transform/LayerNorm"),
    ("cls.predictions.bias", "cls/predictions/output_bias", False),
    # Same [2, H] layout as Google's output_weights.
    ("cls.seq_relationship.weight", "cls/seq_relationship/output_weights", False),
    ("cls.seq_relationship.bias", "cls/seq_relationship/output_bias", False),
]
_FIELDS = {"layer": r"\d+", "proj": "query|key|value"}
_LAYER_NORM_ALIASES = ((".LayerNorm.gamma", ".LayerNorm.weight"), (".LayerNorm.beta", ".LayerNorm.bias"))


def _compile(template):
    pattern = re.escape(template)
    for field, values in _FIELDS.items():
        pattern = pattern.replace(re.escape("{" + field + "}"), f"(?P<{field}>{values})")
    return re.compile(pattern + "$")


# (pattern, the other side's template, transpose), one list per direction.
_FROM_HUGGINGFACE = [(_compile(hf), google, t) for hf, google, t in _RULES]
_TO_HUGGINGFACE = [(_compile(google), hf, t) for hf, google, t in _RULES]
_IGNORED = {
    "embeddings.position_ids": "a buffer of position indices, not a weight",
    "cls.predictions.decoder.weight": "tied to the word embeddings",
    "cls.predictions.decoder.bias": "the same tensor as cls.predictions.bias",
}


def _translate(name, rules):
    """(translated name, transpose) of `name` under the first rule that matches, else None."""
    for pattern, template, transpose in rules:
        match = pattern.match(name)
        if match:
            return template.format(**match.groupdict()), transpose
    return None


def translate_huggingface_names(tensors):
    """{hf_name: array} -> ({google_name: array}, ignored [(name, reason)], untranslated names,
    {google_name: the hf_name it came from})."""
    arrays, ignored, unknown, origin = {}, [], [], {}
    for name, value in tensors.items():
        short = name[len("bert.") :] if name.startswith("bert.") else name
        if short == "cls.predictions.decoder.bias" and "cls.predictions.bias" not in tensors:
            short = "cls.predictions.bias"  # the tied MLM bias, saved under the decoder's name alone
        if short in _IGNORED:
            ignored.append((name, _IGNORED[short]))
            continue
        for old, new in _LAYER_NORM_ALIASES:
            short = short[: -len(old)] + new if short.endswith(old) else short
        translated = _translate(short, _FROM_HUGGINGFACE)
        if translated is None:
            unknown.append(name)
            continue
        google, transpose = translated
        arrays[google] = np.asarray(value).T if transpose else np.asarray(value)
        origin[google] = name
    return arrays, ignored, unknown, origin


def huggingface_names_of(arrays, prefix=""):
    """The inverse of `translate_huggingface_names`: {google_name: array} -> {hf_name: array}
    in transformers' layout; the encoder's names (not the `cls.` heads) get `prefix` ("bert."
    inside a transformers head model, "" for BertModel). A Google name without a rule is a
    ValueError naming it (nothing is dropped silently)."""
    tensors = {}
    for google, value in arrays.items():
        translated = _translate(google, _TO_HUGGINGFACE)
        if translated is None:
            raise ValueError(f"{google!r} has no Hugging Face name in checkpoints/huggingface.py's rules.")
        name, transpose = translated
        # Contiguous: safetensors' numpy writer stores a transposed view's buffer as it lies.
        value = np.asarray(value).T if transpose else np.asarray(value)
        tensors[name if name.startswith("cls.") else prefix + name] = np.ascontiguousarray(value)
    return tensors


def huggingface_tensors(model, prefix=""):
    """A `BertBackbone`'s or `BertPretrainer`'s weights under transformers' names and layout
    ({name: numpy array}), through the importer's own rules read backwards, with the
    `embeddings.position_ids` buffer (int64 [1, max_sequence_length]) that transformers'
    BERT checkpoints carry. `prefix`: see `huggingface_names_of`. The MLM decoder is left out:
    transformers ties it to the word embeddings on load, as we do."""
    from keras_bert_impl.models.bert_pretrainer import BertPretrainer

    targets = pretrainer_variables(model) if isinstance(model, BertPretrainer) else backbone_variables(model)
    # `transpose` there maps a Keras variable to Google's layout (the NSP kernel).
    arrays = {}
    for google, (variable, transpose) in targets.items():
        value = np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable)
        arrays[google] = value.T if transpose else value
    tensors = huggingface_names_of(arrays, prefix)
    backbone = model.backbone if isinstance(model, BertPretrainer) else model
    tensors[prefix + "embeddings.position_ids"] = np.arange(backbone.max_sequence_length, dtype=np.int64)[
        None, :
    ]
    return tensors


def backbone_kwargs_from_huggingface_config(config, source="config.json"):
    # model_type first: another architecture's config (DistilBERT's dim, n_layers) lacks BERT's fields too.
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        raise ValueError(
            f"{source}: model_type={model_type!r}; only BERT ('bert') checkpoints are supported."
        )
    missing = sorted(set(REQUIRED_FIELDS) - set(config))
    if missing:
        raise ValueError(f"{source}: missing fields {missing}; is this a BERT config.json from transformers?")
    # A decoder attends causally, and cross-attends with add_cross_attention; BertBackbone does neither.
    for key in ("is_decoder", "add_cross_attention"):
        if config.get(key, False):
            raise ValueError(
                f"{source}: {key}={config[key]!r}: this BERT attends causally (a decoder, as "
                "BertLMHeadModel); BertBackbone attends in both directions and would not compute its "
                "outputs. Convert an encoder checkpoint (is_decoder and add_cross_attention false)."
            )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            f"{source}: position_embedding_type={config['position_embedding_type']!r}; only 'absolute' "
            "(BERT's learned positions) is supported."
        )
    check_config_numbers(config, source, NUMBER_FIELDS)
    act = config.get("hidden_act", "gelu")
    if act not in HIDDEN_ACT:
        raise ValueError(f"{source}: hidden_act={act!r} is not supported; use one of {list(HIDDEN_ACT)}.")
    return backbone_kwargs_from_fields(
        config,
        {**BERT_CONFIG_ARGUMENTS, "layer_norm_epsilon": ("layer_norm_eps", 1e-12)},
        activation=HIDDEN_ACT[act],
    )


def _load_safetensors(path):
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return load_file(path)
    except SafetensorError as e:
        raise ValueError(
            f"{path} is not a complete safetensors file ({e}): it is truncated or damaged; download or copy "
            "it again."
        ) from None


def _read_shards(src, index):
    """The tensors of transformers' sharded layout: the index's weight_map names each one's shard."""
    weight_map = read_json_file(index).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(
            f"{index} has no weight_map (tensor name -> shard file): it is not transformers' "
            "sharded-checkpoint index. Copy it again from the checkpoint's source."
        )
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        path = os.path.join(src, shard)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{index} names the shard {shard}, which is not in {src}: copy every shard the index lists."
            )
        tensors.update(_load_safetensors(path))
    return tensors


def _read_tensors(src, allow_pickle):
    single = os.path.join(src, "model.safetensors")
    index = os.path.join(src, "model.safetensors.index.json")
    if os.path.exists(single):
        return _load_safetensors(single), single
    if os.path.exists(index):
        return _read_shards(src, index), index
    pickled = os.path.join(src, "pytorch_model.bin")
    if os.path.exists(pickled):
        if not allow_pickle:
            raise ValueError(
                f"{pickled} is a pickle file, and unpickling can run arbitrary code from the file. "
                "Convert it to safetensors (model.safetensors), or, if you trust its source, pass "
                "allow_pickle=True (--allow-pickle on the command line; needs torch installed)."
            )
        try:
            import torch
        except ImportError as e:
            raise ImportError(
                "Reading pytorch_model.bin needs torch: pip install torch, or convert to safetensors."
            ) from e
        state = torch.load(pickled, map_location="cpu", weights_only=False)
        return {k: v.numpy() for k, v in state.items()}, pickled
    raise FileNotFoundError(f"No model.safetensors (or sharded index) in {src}.")


def load_huggingface_checkpoint(src, with_heads=None, allow_pickle=False):
    """Builds a model from a Hugging Face BERT folder and loads every tensor.

    Args:
        src: folder with config.json, model.safetensors and vocab.txt (or tokenizer.json).
        with_heads: None = load MLM/NSP heads when present; False = backbone only.
        allow_pickle: read pytorch_model.bin when there is no safetensors file.
    Returns:
        (BertBackbone or BertPretrainer, ImportReport)
    """
    config, config_path = read_format_config(
        src, "config.json", "the folder holding the Hugging Face model files", "huggingface"
    )
    kwargs = backbone_kwargs_from_huggingface_config(config, config_path)
    tensors, weights_path = _read_tensors(src, allow_pickle)
    arrays, ignored, unknown, origin = translate_huggingface_names(tensors)
    if with_heads is not False:
        _check_tied_bias(tensors, weights_path)
    if _untied_decoder(
        tensors, config, weights_path, with_heads
    ):  # left out with the heads (--backbone-only)
        ignored = [
            (
                name,
                "the MLM decoder (untied here), left out with the heads"
                if "decoder.weight" in name
                else reason,
            )
            for name, reason in ignored
        ]

    vocabulary, lowercase = _vocabulary_and_casing(src, kwargs["vocabulary_size"], config_path)
    tokenizer_config = os.path.join(src, "tokenizer_config.json")
    if os.path.exists(tokenizer_config):
        lowercase = _tokenizer_lowercase(read_json_file(tokenizer_config), tokenizer_config, lowercase)
    model, report = build_and_load(
        kwargs, arrays, weights_path, vocabulary, lowercase, ignored, with_heads=with_heads
    )
    report.name_sources(origin)
    report.unexpected = sorted(report.unexpected + unknown)
    return model, report


def _vocabulary_and_casing(src, vocabulary_size, config_path):
    """(tokens, lowercase) from vocab.txt, or else from tokenizer.json: transformers 5 saves a BERT
    tokenizer without vocab.txt. vocab.txt's casing is guessed from its tokens (no upper-case letter:
    uncased); tokenizer.json's normalizer says it. tokenizer_config.json, read after, has the last word."""
    vocab_path, tokenizer_path = os.path.join(src, "vocab.txt"), os.path.join(src, "tokenizer.json")
    if os.path.exists(vocab_path) or not os.path.exists(tokenizer_path):
        vocabulary = read_checkpoint_vocabulary(vocab_path, vocabulary_size, config_path)
        return vocabulary, vocabulary_is_uncased(vocabulary)
    tokenizer = read_json_file(tokenizer_path)
    model, normalizer = tokenizer.get("model") or {}, tokenizer.get("normalizer") or {}
    if model.get("type") != "WordPiece" or model.get("continuing_subword_prefix", "##") != "##":
        raise ValueError(
            f"{tokenizer_path}: its model is {model.get('type')!r}, not BERT's WordPiece with '##' pieces: "
            "BertPreprocessor cannot reproduce its ids. Give the checkpoint's vocab.txt."
        )
    if normalizer.get("type") != "BertNormalizer":
        raise ValueError(
            f"{tokenizer_path}: its normalizer is {normalizer.get('type')!r}, not BERT's BertNormalizer: "
            "BertPreprocessor cannot reproduce its ids. Give the checkpoint's vocab.txt."
        )
    ids = model.get("vocab") or {}
    # tokenizers (0.23) writes WordPiece's vocab as {token: id} and refuses anything else ("invalid
    # type: sequence, expected a map"); a list is Unigram's layout, [[piece, score], ...].
    if not isinstance(ids, dict) or not all(type(i) is int for i in ids.values()):
        what = (
            "an object whose ids are not all integers"
            if isinstance(ids, dict)
            else f"a JSON {_json_kind(ids)}"
        )
        raise ValueError(
            f"{tokenizer_path}: model.vocab is {what}, but WordPiece's is an object of token -> id "
            "(as the tokenizers library writes and reads it): give the checkpoint's vocab.txt, or a "
            "tokenizer.json saved by tokenizers or transformers."
        )
    tokens = sorted(ids, key=ids.get)
    if sorted(ids.values()) != list(range(len(ids))):
        raise ValueError(
            f"{tokenizer_path}: its WordPiece ids are not 0..{len(ids) - 1} without gaps; give the "
            "checkpoint's vocab.txt."
        )
    if len(tokens) != vocabulary_size:
        raise ValueError(
            f"{tokenizer_path} has {len(tokens)} tokens but {config_path} says vocab_size={vocabulary_size} "
            "(the rows of the token embedding): use the tokenizer that belongs to these weights."
        )
    settings = {
        "do_lower_case": normalizer.get("lowercase", True),
        "strip_accents": normalizer.get("strip_accents"),
        "tokenize_chinese_chars": normalizer.get("handle_chinese_chars", True),
    }
    return tokens, _tokenizer_lowercase(settings, tokenizer_path, settings["do_lower_case"])


def _json_kind(value):
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(value), "value"
    )


def _check_tied_bias(tensors, weights_path):
    """transformers ties cls.predictions.decoder.bias to cls.predictions.bias; the importer reads
    the latter (or the former when alone), so two that differ are not the checkpoint's MLM head."""
    bias, decoder_bias = tensors.get("cls.predictions.bias"), tensors.get("cls.predictions.decoder.bias")
    if bias is not None and decoder_bias is not None and not np.array_equal(bias, decoder_bias):
        raise ValueError(
            f"{weights_path}: cls.predictions.decoder.bias differs from cls.predictions.bias, which "
            "transformers ties to it (up to {:.3g} apart): the file's MLM head is not one model's. "
            "Convert the encoder alone (--backbone-only; with_heads=False), or fix the file.".format(
                float(np.abs(bias - decoder_bias).max())
            )
        )


def _untied_decoder(tensors, config, weights_path, with_heads):
    """Whether the checkpoint's MLM decoder is a tensor of its own (tie_word_embeddings false).
    BertPretrainer's decoder is the word embeddings, so such a checkpoint cannot be loaded with
    its heads (its MLM logits would be another model's: up to 26 apart on a small random one):
    a ValueError unless `with_heads` is False."""
    decoder = next(
        (
            tensors[n]
            for n in ("cls.predictions.decoder.weight", "bert.cls.predictions.decoder.weight")
            if n in tensors
        ),
        None,
    )
    embeddings = next(
        (
            tensors[n]
            for n in ("bert.embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight")
            if n in tensors
        ),
        None,
    )
    if decoder is None or embeddings is None or np.array_equal(decoder, embeddings):
        return False
    if with_heads is False:
        return True
    raise ValueError(
        f"{weights_path}: cls.predictions.decoder.weight is not the word embeddings (the MLM decoder is "
        f"untied: tie_word_embeddings={config.get('tie_word_embeddings')!r} in config.json), but "
        "BertPretrainer ties them, so its MLM logits would not be the checkpoint's. Convert the encoder "
        "alone (--backbone-only; with_heads=False)."
    )


def _tokenizer_lowercase(settings, path, lowercase):
    """tokenizer_config.json's do_lower_case; a setting BertPreprocessor does not have is an error
    (it tokenizes with BERT's basic tokenizer: accents stripped exactly when lower-casing, CJK
    characters split), not ids that differ from transformers' without a word."""
    lowercase = settings.get("do_lower_case", lowercase)
    strip_accents = settings.get("strip_accents")
    refused = []
    if strip_accents is not None and bool(strip_accents) != bool(lowercase):
        refused.append(f"strip_accents={strip_accents!r} with do_lower_case={lowercase!r}")
    for key in ("tokenize_chinese_chars", "do_basic_tokenize"):
        if settings.get(key, True) is False:
            refused.append(f"{key}=False")
    if refused:
        raise ValueError(
            f"{path} asks for {', '.join(refused)}, which BertPreprocessor cannot do (it strips accents "
            "exactly when it lower-cases, and always splits words and CJK characters as BERT's basic "
            "tokenizer): its token ids would differ from this checkpoint's tokenizer. Use a checkpoint "
            "with BERT's standard tokenizer settings."
        )
    return lowercase
