"""Import Google's original BERT release: bert_config.json + bert_model.ckpt.* + vocab.txt."""

import glob
import os

import tensorflow as tf

from keras_bert_impl.tokenization.vocabulary import vocabulary_is_uncased
from keras_bert_impl.checkpoints.import_report import (
    BERT_CONFIG_ARGUMENTS,
    BERT_CONFIG_NUMBERS,
    BERT_CONFIG_OPTIONAL,
    BERT_CONFIG_REQUIRED,
    backbone_kwargs_from_fields,
    check_config_numbers,
    read_format_config,
)
from keras_bert_impl.checkpoints.weight_map import build_and_load, read_checkpoint_vocabulary

# hidden_act is required here (transformers' BertConfig defaults it).
REQUIRED_FIELDS = (*BERT_CONFIG_REQUIRED, "hidden_act")
OPTIONAL_FIELDS = BERT_CONFIG_OPTIONAL
# Present in some of Google's releases (multilingual, Chinese) and without effect on BERT's encoder.
INERT_FIELDS = (
    "directionality",
    "pooler_fc_size",
    "pooler_num_attention_heads",
    "pooler_num_fc_layers",
    "pooler_size_per_head",
    "pooler_type",
)
NUMBER_FIELDS = BERT_CONFIG_NUMBERS
# Google's modeling.py implements "gelu" with the tanh approximation.
HIDDEN_ACT = {"gelu": "gelu_approximate", "relu": "relu", "tanh": "tanh", "linear": "linear"}


def backbone_kwargs_from_google_config(config, source="bert_config.json"):
    """Maps Google's bert_config.json fields to BertBackbone arguments."""
    unknown = sorted(set(config) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS) - set(INERT_FIELDS))
    missing = sorted(set(REQUIRED_FIELDS) - set(config))
    if unknown or missing:
        raise ValueError(
            f"{source}: unknown fields {unknown}, missing fields {missing}. Google's BERT config has "
            f"{list(REQUIRED_FIELDS + OPTIONAL_FIELDS)}; is this a config of another format "
            "(try --format huggingface)?"
        )
    check_config_numbers(config, source, NUMBER_FIELDS)
    if config["hidden_act"] not in HIDDEN_ACT:
        raise ValueError(
            f"{source}: hidden_act={config['hidden_act']!r} is not supported; use one of {list(HIDDEN_ACT)}."
        )
    return backbone_kwargs_from_fields(
        config,
        BERT_CONFIG_ARGUMENTS,
        activation=HIDDEN_ACT[config["hidden_act"]],
        layer_norm_epsilon=1e-12,  # fixed in Google's layer_norm
    )


def checkpoint_prefix(
    src, expected="bert_model.ckpt.index and bert_model.ckpt.data-* as in Google's release zip"
):
    """The checkpoint the 'checkpoint' state file names (a pretraining run's folder holds
    model.ckpt-N for several N; by its name in `src` when its path is elsewhere), else the
    folder's only one (the release's bert_model.ckpt); several without a state file are a
    ValueError naming them, a state file naming one the folder lacks a FileNotFoundError.
    `expected`: what to say is missing when there is none."""
    if os.path.isfile(src + ".index"):
        return src
    latest = tf.train.latest_checkpoint(src)
    if latest:
        return latest
    candidates = sorted(p[: -len(".index")] for p in glob.glob(os.path.join(src, "*.index")))
    state = tf.train.get_checkpoint_state(src)
    if state is not None and state.model_checkpoint_path:
        # The state file names a checkpoint that is not where it says: a run folder copied from
        # another machine (TensorFlow writes absolute paths) holds it under the same name here.
        named = os.path.basename(state.model_checkpoint_path)
        if os.path.join(src, named) in candidates:
            return os.path.join(src, named)
        held = ", ".join(os.path.basename(p) for p in candidates) or "no checkpoint"
        raise FileNotFoundError(
            f"{os.path.join(src, 'checkpoint')} names {named}, which is not in the folder (it holds "
            f"{held}): copy {named}.index and {named}.data-* there, or make that 'checkpoint' file name one "
            "the folder holds."
        )
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise FileNotFoundError(f"No TF checkpoint in {src}: expected {expected}.")
    raise ValueError(
        f"{len(candidates)} TF checkpoints in {src} ({', '.join(os.path.basename(p) for p in candidates)}) "
        "and no 'checkpoint' file to say which is latest: keep one of them in the folder."
    )


def _object_based(names):
    # A TF2 checkpoint (tf.train.Checkpoint: Model Garden's) names its values by object path,
    # not by Google's TF1 variable names (bert/...).
    return "_CHECKPOINTABLE_OBJECT_GRAPH" in names and not any(n.startswith("bert/") for n in names)


def holds_object_based_checkpoint(src):
    """Whether the checkpoint of folder `src` (`checkpoint_prefix`'s) is a TF2 object-based one,
    as Model Garden's TF2 BERT release holds beside a bert_config.json: a folder to read with
    --format model-garden, though its config file is Google's. False when there is none to read
    (the importer then says why)."""
    try:
        names = {name for name, _ in tf.train.list_variables(checkpoint_prefix(src))}
    except (ValueError, OSError, tf.errors.OpError):
        return False
    return _object_based(names)


def _refuse_object_based(prefix, names):
    """An object-based checkpoint given as Google's: said once rather than as every BERT name
    missing."""
    if _object_based(names):
        example = next(n for n in sorted(names) if n != "_CHECKPOINTABLE_OBJECT_GRAPH")
        raise ValueError(
            f"{prefix} is an object-based TF2 checkpoint (names such as {example!r}), not Google's TF1 "
            "release (bert/embeddings/word_embeddings, ...). If it holds a Model Garden encoder, convert "
            "it with --format model-garden (it reads this bert_config.json, or the encoder's "
            "encoder_config.json)."
        )


def load_google_checkpoint(src, with_heads=None):
    """Builds a model from a Google release folder and loads every tensor.

    Args:
        src: folder with bert_config.json, bert_model.ckpt.* and vocab.txt.
        with_heads: None = load the MLM/NSP heads when the checkpoint has them;
            False = backbone only (head tensors are reported as unexpected).
    Returns:
        (BertBackbone or BertPretrainer, ImportReport)
    """
    config, config_path = read_format_config(
        src, "bert_config.json", "the unzipped Google release folder", "google"
    )
    kwargs = backbone_kwargs_from_google_config(config, config_path)
    prefix = checkpoint_prefix(src)
    arrays, ignored = {}, []
    try:
        reader = tf.train.load_checkpoint(prefix)
        names = reader.get_variable_to_shape_map()
        for name in names:
            if name == "global_step" or name.endswith("/adam_m") or name.endswith("/adam_v"):
                ignored.append((name, "optimizer state"))
            else:
                arrays[name] = reader.get_tensor(name)
    except (tf.errors.OpError, IndexError, ValueError) as e:  # IndexError: a data file cut short
        raise ValueError(
            f"{prefix}: the TF checkpoint is truncated or damaged ({type(e).__name__}: "
            f"{' '.join(str(e).split())[:200]}); download or unzip it again."
        ) from None
    _refuse_object_based(prefix, names)

    vocabulary = read_checkpoint_vocabulary(
        os.path.join(src, "vocab.txt"), kwargs["vocabulary_size"], config_path
    )
    return build_and_load(
        kwargs, arrays, prefix, vocabulary, vocabulary_is_uncased(vocabulary), ignored, with_heads=with_heads
    )
