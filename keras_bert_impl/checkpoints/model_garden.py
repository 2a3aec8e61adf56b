"""Import a tf-models-official (Model Garden) BertEncoder: a live instance or its checkpoint.

Model Garden keeps attention kernels per head ([H, N, D] and [N, D, H]); we
reshape them to Google's [H, H].
"""

import os
import re

import numpy as np

from keras_bert_impl.checkpoints.import_report import (
    BERT_CONFIG_ARGUMENTS,
    backbone_kwargs_from_fields,
    other_format_hint,
    read_json_file,
)
from keras_bert_impl.checkpoints.weight_map import (
    assign_weights,
    backbone_variables,
    read_checkpoint_vocabulary,
)
from keras_bert_impl.models.bert_backbone import BertBackbone

_L = r"transformer/layer_(\d+)/"
_G = r"bert/encoder/layer_\1/"
_RULES = [
    (r"word_embeddings/embeddings", "bert/embeddings/word_embeddings"),
    (r"position_embedding/embeddings", "bert/embeddings/position_embeddings"),
    (r"type_embeddings/embeddings", "bert/embeddings/token_type_embeddings"),
    (r"embeddings/layer_norm/(gamma|beta)", r"bert/embeddings/LayerNorm/\1"),
    (_L + r"self_attention/(query|key|value)/(kernel|bias)", _G + r"attention/self/\2/\3"),
    (_L + r"self_attention/attention_output/(kernel|bias)", _G + r"attention/output/dense/\2"),
    (_L + r"self_attention_layer_norm/(gamma|beta)", _G + r"attention/output/LayerNorm/\2"),
    (_L + r"intermediate/(kernel|bias)", _G + r"intermediate/dense/\2"),
    (_L + r"output/(kernel|bias)", _G + r"output/dense/\2"),
    (_L + r"output_layer_norm/(gamma|beta)", _G + r"output/LayerNorm/\2"),
    (r"pooler_transform/(kernel|bias)", r"bert/pooler/dense/\1"),
]
# BertEncoderV2 prefixes its variables with the model name ("bert_encoder_v2/..."),
# the functional BertEncoder does not; the optional leading group takes either.
_COMPILED = [(re.compile(r"(?:.*/)?" + p + "$"), g) for p, g in _RULES]


def translate_model_garden_names(named_arrays):
    """{variable name: array} -> ({google_name: array}, untranslated names)."""
    arrays, unknown, _ = _translate(named_arrays)
    return arrays, unknown


def _translate(named_arrays):
    """translate_model_garden_names, and {google_name: the variable name it came from}."""
    arrays, unknown, origin = {}, [], {}
    for name, value in named_arrays.items():
        short = name.split(":")[0]
        for pattern, google in _COMPILED:
            if pattern.match(short):
                value = np.asarray(value)
                if value.ndim == 3:  # [H, N, D] -> [H, H]; [N, D, H] -> [H, H]
                    value = (
                        value.reshape(value.shape[0], -1)
                        if "attention_output" not in short
                        else value.reshape(-1, value.shape[-1])
                    )
                elif value.ndim == 2 and "self_attention/" in short and short.endswith("bias"):
                    value = value.reshape(-1)  # [N, D] -> [H]
                arrays[pattern.match(short).expand(google)] = value
                origin[pattern.match(short).expand(google)] = name
                break
        else:
            unknown.append(name)
    return arrays, unknown, origin


def _probe_activation(fn):
    """Tells which GELU form (or other) a Model Garden activation callable computes."""
    from math import erf, pi, sqrt, tanh

    xs = np.linspace(-3, 3, 13).astype("float32")
    got = np.asarray(fn(xs))
    forms = {
        "gelu": [0.5 * x * (1 + erf(x / sqrt(2))) for x in xs],
        "gelu_approximate": [0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3))) for x in xs],
        "relu": np.maximum(xs, 0),
        "tanh": np.tanh(xs),
    }
    for name, ref in forms.items():
        if np.allclose(got, ref, atol=1e-6):
            return name
    raise ValueError(
        f"The encoder's inner activation {fn!r} is none of {list(forms)}; it cannot be imported."
    )


# BertBackbone's arguments and the BertEncoder get_config() keys that hold them: bert_config.json's
# names but for five (and no initializer_range: it saves an initializer object, not read here).
_ENCODER_ARGUMENTS = {
    **{
        argument: field
        for argument, field in BERT_CONFIG_ARGUMENTS.items()
        if argument != "initializer_range"
    },
    "num_layers": "num_layers",
    "intermediate_dim": "inner_dim",
    "max_sequence_length": "max_sequence_length",
    "dropout": ("output_dropout", 0.1),
    "attention_dropout": ("attention_dropout", 0.1),
}


def backbone_kwargs_from_model_garden(encoder):
    # By name, so that this module needs tf-models-official only when it is given one of its encoders.
    if not {"BertEncoder", "BertEncoderV2"} & {cls.__name__ for cls in type(encoder).__mro__}:
        raise ValueError(
            f"{type(encoder).__name__} is not a BERT encoder: load_model_garden_encoder copies a BertEncoder "
            "or BertEncoderV2 (ALBERT shares one layer across depth, MobileBERT has bottlenecks)."
        )
    if not encoder.weights:
        raise ValueError(
            f"The {type(encoder).__name__} has no weights yet: call it once on inputs (or restore its "
            "checkpoint into it) before copying it."
        )
    config = encoder.get_config()
    unsupported = {"norm_first": False, "output_range": None, "embedding_layer": None}
    for key, expected in unsupported.items():
        if config.get(key, expected) != expected:
            raise ValueError(
                f"Model Garden encoder with {key}={config[key]!r} is not a BERT encoder we can import (need "
                f"{expected!r})."
            )
    width = config.get("embedding_width")
    if width not in (None, config["hidden_size"]):
        raise ValueError(
            f"embedding_width={width} differs from hidden_size={config['hidden_size']} (ALBERT-style "
            "factorised embeddings); not supported."
        )
    block = encoder.transformer_layers[0]
    return backbone_kwargs_from_fields(
        config,
        _ENCODER_ARGUMENTS,
        activation=_probe_activation(block._intermediate_activation_layer),
        layer_norm_epsilon=block._norm_epsilon,
    )


def load_model_garden_encoder(encoder, source=None, source_names=None):
    """Copies a live tf-models-official BertEncoder or BertEncoderV2 into a new BertBackbone.

    Args:
        encoder: the built encoder.
        source: what the report names as the source (default: "live <class>").
        source_names: {variable name: the name the report gives it} (a checkpoint's keys);
            default: the encoder's variable names.
    Returns:
        (BertBackbone, ImportReport)
    """
    kwargs = backbone_kwargs_from_model_garden(encoder)
    arrays, unknown, origin = _translate({w.name: w.numpy() for w in encoder.weights})
    backbone = BertBackbone(**kwargs)
    report = assign_weights(backbone_variables(backbone), arrays, source or f"live {type(encoder).__name__}")
    names = source_names or {}
    report.name_sources({google: names.get(name, name) for google, name in origin.items()})
    report.unexpected = sorted(report.unexpected + [names.get(name, name) for name in unknown])
    return backbone, report


def load_model_garden_checkpoint(src):
    """Rebuilds a BertEncoderV2 from `encoder_config.json` in `src` (its get_config(), JSON), or
    else the encoder Model Garden builds from a `bert_config.json` (its TF2 BERT releases),
    restores the TF2 checkpoint there (saved as tf.train.Checkpoint(encoder=...) or (model=...),
    as Model Garden's checkpoint converter writes it, or a pretraining run's (model=BertPretrainerV2),
    the encoder at model/encoder_network), and copies it.

    A vocab.txt in `src`, when present, travels with the model.
    """
    from keras_bert_impl.checkpoints.google_tf1 import checkpoint_prefix
    from keras_bert_impl.tokenization.vocabulary import vocabulary_is_uncased

    encoder, config_path, sizes = _rebuilt_encoder(src)
    # The 'checkpoint' file's, else the only one (Model Garden's converted release: bert_model.ckpt.*).
    path = checkpoint_prefix(
        src, expected="a 'checkpoint' file with ckpt-N.*, or one checkpoint's .index and .data-*"
    )
    checkpoint, names = _restore_encoder(encoder, path, config_path, sizes)
    keys = _checkpoint_keys(checkpoint, path)
    backbone, report = load_model_garden_encoder(encoder, source=path, source_names=keys)
    read = set(keys.values()) | {"_CHECKPOINTABLE_OBJECT_GRAPH"}
    report.ignored = [(name, _unread_reason(name)) for name in names if name not in read]
    vocab_path = os.path.join(src, "vocab.txt")
    if os.path.exists(vocab_path):
        vocabulary = read_checkpoint_vocabulary(vocab_path, backbone.vocabulary_size, config_path)
        backbone.set_vocabulary(vocabulary, lowercase=vocabulary_is_uncased(vocabulary))
    return backbone, report


_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
# Where the encoder sits in a checkpoint, first match first: Model Garden's pretraining saves
# tf.train.Checkpoint(model=BertPretrainerV2), whose encoder is model/encoder_network; its
# tf2_encoder_checkpoint_converter names the encoder "encoder" (its flag's default) or "model"
# (its convert_checkpoint's default).
_ENCODER_PATHS = (("model", "encoder_network"), ("encoder",), ("model",))


def _rebuilt_encoder(src):
    """(the encoder `src`'s config describes, called once so that it has its weights, the config's
    path, its "num_layers=N, hidden_size=H")."""
    from official.nlp.modeling import networks

    config_path = os.path.join(src, "encoder_config.json")
    google_path = os.path.join(src, "bert_config.json")
    if os.path.exists(config_path):
        config = read_json_file(config_path)
        try:
            encoder = networks.BertEncoderV2(**config)
        except TypeError as e:  # a key BertEncoderV2 does not take
            raise ValueError(
                f"{config_path} is not a BertEncoderV2 config ({e}): it must hold the encoder's "
                "get_config(), with BertEncoderV2's own argument names (hidden_size, num_layers, ...)."
            ) from None
        sizes = f"num_layers={config.get('num_layers')}, hidden_size={config.get('hidden_size')}"
    elif os.path.exists(google_path):
        encoder = _encoder_from_google_config(google_path)
        config = encoder.get_config()
        config_path, sizes = (
            google_path,
            f"num_layers={config['num_layers']}, hidden_size={config['hidden_size']}",
        )
    else:
        raise FileNotFoundError(
            f"No encoder_config.json in {src}: save the encoder's get_config() as JSON next to its "
            "checkpoint (or give Model Garden's bert_config.json)." + other_format_hint(src, "model-garden")
        )
    dummy = np.zeros((1, 2), "int32")
    encoder(dict(input_word_ids=dummy, input_mask=dummy + 1, input_type_ids=dummy))
    return encoder, config_path, sizes


def _encoder_from_google_config(path):
    """What Model Garden's tf2_encoder_checkpoint_converter restores a TF2 BERT checkpoint into:
    bert_models.get_transformer_encoder of the bert_config.json (a functional BertEncoder)."""
    from official.legacy.bert import bert_models, configs

    from keras_bert_impl.checkpoints.google_tf1 import backbone_kwargs_from_google_config

    config = read_json_file(path)
    backbone_kwargs_from_google_config(config, path)  # the fields --format google takes, or a ValueError
    return bert_models.get_transformer_encoder(configs.BertConfig.from_dict(config))


def _restore_encoder(encoder, path, config_path, sizes):
    """Restores `encoder` from `path`, refusing a checkpoint that holds more or other than it:
    tf.train.Checkpoint.read fills what the encoder has and leaves the rest unread (a config with
    fewer layers than the checkpoint gave a shallower model). Returns the tf.train.Checkpoint it
    read through and the checkpoint's names."""
    import tensorflow as tf

    names = [name for name, _ in tf.train.list_variables(path)]
    values = [name for name in names if name.endswith(_VALUE) and "/.OPTIMIZER_SLOT/" not in name]
    where = next((p for p in _ENCODER_PATHS if any(n.startswith("/".join(p) + "/") for n in values)), None)
    if where is None:
        tops = sorted({name.split("/")[0] for name in values})
        raise ValueError(
            f"{path} holds no encoder: its top-level objects are {tops}, and Model Garden saves the "
            "encoder as 'encoder' or 'model' (tf.train.Checkpoint(encoder=...)), or a pretrainer's as "
            "model/encoder_network. Save the BertEncoderV2 alone under one of those names."
        )
    values = [name for name in values if name.startswith("/".join(where) + "/")]
    # More is a deeper or wider encoder than the config's; fewer can be a variable shared with
    # a head and saved under the head's path (a pretrainer's word embeddings), which read() finds.
    if len(values) > len(encoder.weights):
        raise ValueError(
            f"{path} holds {len(values)} variables under {'/'.join(where)!r} but the encoder built from "
            f"{config_path} has {len(encoder.weights)} ({sizes}): the config does not belong to this "
            "checkpoint. Use the encoder's own get_config()."
        )
    checkpoint = _rooted(where, encoder)
    try:
        checkpoint.read(path).assert_existing_objects_matched()
    except (ValueError, AssertionError) as e:  # a shape that differs; a variable not in the checkpoint
        raise ValueError(
            f"{path} does not fit the encoder built from {config_path} ({' '.join(str(e).split())[:300]}): "
            "use the encoder's own get_config()."
        ) from None
    return checkpoint, names


def _rooted(where, encoder):
    """A tf.train.Checkpoint holding `encoder` at the object path `where` (("model", "encoder_network"))."""
    import tensorflow as tf

    node = encoder
    for key in reversed(where):
        node = tf.train.Checkpoint(**{key: node})
    return node


def _checkpoint_keys(checkpoint, path):
    """{variable name: its key in the checkpoint at `path`}, walking the checkpoint's own object
    graph beside `checkpoint` (what read it), edge by edge: a variable shared with a head is saved
    under the path the writer reached it by first, which need not be the encoder's."""
    import collections

    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(tf.train.load_checkpoint(path).get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    view = tf.train.TrackableView(checkpoint)
    keys, seen, queue = {}, set(), collections.deque([(checkpoint, 0)])  # node 0: the saved root
    while queue:
        node, node_id = queue.popleft()
        if id(node) in seen:
            continue
        seen.add(id(node))
        saved = graph.nodes[node_id]
        if isinstance(node, tf.Variable):
            keys.update({node.name: a.checkpoint_key for a in saved.attributes if a.name == "VARIABLE_VALUE"})
        children = {child.local_name: child.node_id for child in saved.children}
        queue.extend(
            (child, children[name]) for name, child in view.children(node).items() if name in children
        )
    return keys


def _unread_reason(name):
    if name.startswith("save_counter/"):
        return "the checkpoint's save counter"
    if "/.OPTIMIZER_SLOT/" in name or name.startswith("optimizer/"):
        return "optimizer state"
    return "not the encoder"
