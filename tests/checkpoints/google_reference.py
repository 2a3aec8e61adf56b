"""Write a checkpoint in Google's original BERT release format with Google's code.

This is a test-side reference: it runs Google's own ``bert/modeling.py`` (and
the pre-training head functions of ``bert/run_pretraining.py``) from the PyPI
package ``bert-tensorflow==1.0.4``, so that our importer can be checked
against weights and activations that nobody on this project computed.

Google's files are TF1 code.  They are *not* edited, copied or patched on
disk: their source text is read from the installed package and executed in a
private module namespace whose imports are redirected to a small shim:

* ``import tensorflow.compat.v1 as tf`` -> :class:`_TFCompatV1Shim`, which is
  ``tf.compat.v1`` except for ``tf.layers.dense`` (Keras 3 makes
  ``tf.compat.v1.layers.dense`` raise "not available with Keras 3");
  :func:`_legacy_dense` stands in with the TF1 semantics: variables
  ``<scope>/dense/kernel`` [in, units] and ``<scope>/dense/bias`` [units],
  ``matmul`` + ``bias_add`` + activation.
* ``from tensorflow.contrib import layers as contrib_layers`` -> an object
  whose ``layer_norm`` is ``tf_slim.layers.layer_norm``, the verbatim port of
  ``tf.contrib.layers.layer_norm``: variables ``LayerNorm/beta`` and
  ``LayerNorm/gamma``, moments over the last axis, and
  ``variance_epsilon = 1e-12`` for float32 (hard-coded in contrib/tf_slim,
  not configurable from BERT).

Every line of Google's math runs as shipped.  Notably Google's ``gelu`` in
this package (and in google-research/bert master) is the *tanh
approximation* ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``,
not the exact erf form.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import types
from importlib import metadata

import numpy as np

__all__ = [
    "GOOGLE_CONFIG_DEFAULTS",
    "load_google_modeling",
    "load_google_pretraining_heads",
    "make_vocab",
    "write_google_checkpoint",
]

_DIST = "bert-tensorflow"
_DIST_VERSION = "1.0.4"

# Field names and defaults of Google's modeling.BertConfig (bert_config.json).
GOOGLE_CONFIG_DEFAULTS = {
    "vocab_size": None,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 16,
    "initializer_range": 0.02,
}


# --------------------------------------------------------------------------
# Shim
# --------------------------------------------------------------------------
def _tf():
    import tensorflow as tf  # deferred: importing this module stays cheap

    return tf


def _legacy_dense(
    inputs,
    units,
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=None,
    name=None,
    reuse=None,
    **unsupported,
):
    """Stand-in for TF1 ``tf.layers.dense`` (graph mode, rank-2 inputs).

    Creates ``<current scope>/<name or dense[_N]>/kernel`` of shape
    [in_features, units] and ``.../bias`` of shape [units], like
    ``tf.compat.v1.layers.Dense`` did, and computes
    ``activation(bias_add(matmul(inputs, kernel), bias))``.
    """
    if unsupported:
        raise TypeError("dense shim: unsupported arguments %s" % sorted(unsupported))
    v1 = _tf().compat.v1
    inputs = v1.convert_to_tensor(inputs)
    if inputs.shape.ndims != 2:
        raise ValueError("dense shim only handles rank-2 inputs (as BERT uses it)")
    in_features = int(inputs.shape[-1])
    with v1.variable_scope(name, default_name="dense", reuse=reuse):
        kernel = v1.get_variable(
            "kernel", shape=[in_features, units], dtype=inputs.dtype, initializer=kernel_initializer
        )
        outputs = v1.matmul(inputs, kernel)
        if use_bias:
            bias = v1.get_variable(
                "bias",
                shape=[units],
                dtype=inputs.dtype,
                initializer=bias_initializer or v1.zeros_initializer(),
            )
            outputs = v1.nn.bias_add(outputs, bias)
        if activation is not None:
            outputs = activation(outputs)
    return outputs


class _TFCompatV1Shim(types.ModuleType):
    """``tf.compat.v1`` with ``layers.dense`` replaced (see module doc)."""

    def __init__(self):
        super().__init__("tensorflow.compat.v1 (google_reference shim)")
        self.layers = types.SimpleNamespace(dense=_legacy_dense)

    def __getattr__(self, name):
        return getattr(_tf().compat.v1, name)


def _contrib_layers():
    import tf_slim

    return types.SimpleNamespace(layer_norm=tf_slim.layers.layer_norm)


def _make_import(tf_shim):
    fake_tensorflow = types.SimpleNamespace(
        compat=types.SimpleNamespace(v1=tf_shim), contrib=types.SimpleNamespace(layers=_contrib_layers())
    )

    def shim_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "tensorflow" or name.startswith("tensorflow.")):
            if name not in ("tensorflow", "tensorflow.compat.v1", "tensorflow.contrib"):
                raise ImportError("google_reference shim does not provide %r" % name)
            if fromlist and name == "tensorflow.contrib":
                return fake_tensorflow.contrib
            if fromlist and name == "tensorflow.compat.v1":
                return tf_shim
            return fake_tensorflow
        if level == 0 and (name == "bert" or name.startswith("bert.")):
            raise ImportError("google_reference: exec only self-contained parts of bert")
        return builtins.__import__(name, globals, locals, fromlist, level)

    return shim_import


def _google_file(relpath):
    try:
        dist = metadata.distribution(_DIST)
    except metadata.PackageNotFoundError as e:  # pragma: no cover
        raise ImportError(
            "tests/checkpoints/google_reference.py needs %s==%s "
            "(pip install %s==%s)" % (_DIST, _DIST_VERSION, _DIST, _DIST_VERSION)
        ) from e
    if dist.version != _DIST_VERSION:  # pragma: no cover
        raise ImportError("expected %s==%s, found %s" % (_DIST, _DIST_VERSION, dist.version))
    path = str(dist.locate_file(relpath))
    with open(path, encoding="utf-8") as f:
        return path, f.read()


_CACHE = {}


def load_google_modeling():
    """Google's ``bert/modeling.py`` executed unmodified against the shim."""
    if "modeling" not in _CACHE:
        path, source = _google_file("bert/modeling.py")
        tf_shim = _TFCompatV1Shim()
        mod = types.ModuleType("google_bert_modeling")
        mod.__file__ = path
        mod.__dict__["__builtins__"] = dict(vars(builtins), __import__=_make_import(tf_shim))
        exec(compile(source, path, "exec"), mod.__dict__)  # noqa: S102
        _CACHE["modeling"] = mod
    return _CACHE["modeling"]


_HEAD_FUNCTIONS = ("gather_indexes", "get_masked_lm_output", "get_next_sentence_output")


def load_google_pretraining_heads():
    """The head functions of Google's ``bert/run_pretraining.py``, unmodified.

    The file defines absl flags and imports ``bert.optimization`` at module
    level, so only the three function definitions are taken from its parsed
    source (exact original text and line numbers) and executed with ``tf``
    the shim and ``modeling`` the module from :func:`load_google_modeling`.
    """
    if "heads" not in _CACHE:
        path, source = _google_file("bert/run_pretraining.py")
        tree = ast.parse(source, path)
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in _HEAD_FUNCTIONS]
        if sorted(n.name for n in defs) != sorted(_HEAD_FUNCTIONS):
            raise ImportError("run_pretraining.py lacks %s" % (_HEAD_FUNCTIONS,))
        modeling = load_google_modeling()
        ns = {"__builtins__": modeling.__dict__["__builtins__"], "tf": modeling.tf, "modeling": modeling}
        exec(compile(ast.Module(body=defs, type_ignores=[]), path, "exec"), ns)  # noqa: S102
        _CACHE["heads"] = types.SimpleNamespace(**{k: ns[k] for k in _HEAD_FUNCTIONS})
    return _CACHE["heads"]


# --------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------
def make_vocab(vocab_size):
    """A WordPiece vocab of exactly ``vocab_size`` tokens, Google's layout.

    ``[PAD]``, ``[unused0..k-1]``, ``[UNK]``, ``[CLS]``, ``[SEP]``, ``[MASK]``,
    then filler tokens.  With ``vocab_size >= 1000`` k = 99, so the special
    ids equal those of Google's uncased release (UNK=100, CLS=101, SEP=102,
    MASK=103); smaller vocabs use k = vocab_size // 10 (vocab 100: UNK=11,
    CLS=12, SEP=13, MASK=14).
    """
    if vocab_size < 5:
        raise ValueError("vocab_size must be >= 5")
    k = 99 if vocab_size >= 1000 else vocab_size // 10
    tokens = ["[PAD]"] + ["[unused%d]" % i for i in range(k)]
    tokens += ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    fillers = list(".,!?'-") + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    fillers += [str(d) for d in range(10)]
    fillers += ["##" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    i = 0
    while len(tokens) < vocab_size:
        if i < len(fillers):
            tokens.append(fillers[i])
        else:
            tokens.append("tok%d" % (i - len(fillers)))
        i += 1
    return tokens[:vocab_size]


# --------------------------------------------------------------------------
# Writer
# --------------------------------------------------------------------------
def _full_config(config):
    unknown = set(config) - set(GOOGLE_CONFIG_DEFAULTS)
    if unknown:
        raise ValueError("not Google bert_config.json fields: %s" % sorted(unknown))
    full = dict(GOOGLE_CONFIG_DEFAULTS)
    full.update(config)
    if full["vocab_size"] is None:
        raise ValueError("config needs vocab_size")
    return full


def write_google_checkpoint(
    out_dir,
    config,
    token_ids,
    segment_ids,
    input_mask,
    masked_positions=None,
    seed=0,
    with_heads=True,
    randomize_constants=True,
):
    """Build Google's BertModel, save it in release format, run it.

    Args:
      out_dir: folder to create/fill with ``bert_config.json``,
        ``bert_model.ckpt.{index,data-00000-of-00001,meta}`` and ``vocab.txt``
        (the layout of Google's release zips; checkpoint prefix
        ``<out_dir>/bert_model.ckpt``).
      config: dict with Google's ``bert_config.json`` field names; missing
        fields take BertConfig's defaults (``hidden_act`` "gelu" = Google's
        tanh approximation).
      token_ids, segment_ids, input_mask: int arrays [B, T].
      masked_positions: int array [B, P] of positions to predict with the MLM
        head (only used with ``with_heads``; default: position 1 of every row).
      seed: graph-level seed (``tf.compat.v1.set_random_seed``) for the
        random initialisation; same seed + config -> same weights.
      with_heads: also build the pre-training heads with Google's
        ``run_pretraining.get_masked_lm_output`` / ``get_next_sentence_output``
        (variables ``cls/predictions/...``, ``cls/seq_relationship/...``).
      randomize_constants: Google initialises every bias, LayerNorm beta and
        ``output_bias`` to 0 and every LayerNorm gamma to 1, which would let an
        importer that drops or swaps them pass.  When True (default), after
        Google's initialisers run, those variables are overwritten with
        seeded values (biases/betas ~ N(0, 0.1^2), gammas ~ 1 + N(0, 0.1^2));
        the checkpoint and the returned outputs both use the overwritten values.
        Weight matrices and embeddings always keep Google's truncated-normal
        init (stddev ``initializer_range``).

    Returns:
      dict of numpy float32 arrays:
        ``embedding_output`` [B,T,H], ``all_encoder_layers`` [L,B,T,H],
        ``sequence_output`` [B,T,H], ``pooled_output`` [B,H]; with heads also
        ``mlm_logits`` [B,P,V], ``mlm_log_probs`` [B,P,V] (Google's
        log_softmax output), ``nsp_logits`` [B,2], ``nsp_log_probs`` [B,2].
        BertModel is built with ``is_training=False`` (no dropout).
    """
    tf = _tf()
    v1 = tf.compat.v1
    modeling = load_google_modeling()

    token_ids = np.asarray(token_ids, dtype=np.int32)
    segment_ids = np.asarray(segment_ids, dtype=np.int32)
    input_mask = np.asarray(input_mask, dtype=np.int32)
    if token_ids.ndim != 2 or segment_ids.shape != token_ids.shape or input_mask.shape != token_ids.shape:
        raise ValueError("token_ids, segment_ids, input_mask must share shape [B, T]")
    batch, seq_len = token_ids.shape
    if with_heads:
        masked_positions = _checked_positions(masked_positions, batch, seq_len)

    full = _full_config(config)
    bert_config = modeling.BertConfig.from_dict(full)
    os.makedirs(out_dir, exist_ok=True)

    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(seed)
        ids_t = v1.placeholder(tf.int32, [batch, seq_len], name="input_ids")
        seg_t = v1.placeholder(tf.int32, [batch, seq_len], name="segment_ids")
        mask_t = v1.placeholder(tf.int32, [batch, seq_len], name="input_mask")
        model = modeling.BertModel(
            config=bert_config,
            is_training=False,
            input_ids=ids_t,
            input_mask=mask_t,
            token_type_ids=seg_t,
            use_one_hot_embeddings=False,
        )
        fetches = {
            "embedding_output": model.get_embedding_output(),
            "all_encoder_layers": tf.stack(model.get_all_encoder_layers()),
            "sequence_output": model.get_sequence_output(),
            "pooled_output": model.get_pooled_output(),
        }
        feed = {ids_t: token_ids, seg_t: segment_ids, mask_t: input_mask}
        if with_heads:
            heads = load_google_pretraining_heads()
            n_pred = masked_positions.shape[1]
            pos_t = v1.placeholder(tf.int32, [batch, n_pred], name="masked_lm_positions")
            feed[pos_t] = masked_positions
            # Labels only feed Google's losses, which are not returned.
            _, _, mlm_log_probs = heads.get_masked_lm_output(
                bert_config,
                model.get_sequence_output(),
                model.get_embedding_table(),
                pos_t,
                tf.zeros([batch, n_pred], tf.int32),
                tf.ones([batch, n_pred], tf.float32),
            )
            _, _, nsp_log_probs = heads.get_next_sentence_output(
                bert_config, model.get_pooled_output(), tf.zeros([batch], tf.int32)
            )
            # Google's functions return log_softmax(logits); their input is the
            # logits tensor (BiasAdd) computed by Google's code.
            for lp in (mlm_log_probs, nsp_log_probs):
                assert lp.op.type == "LogSoftmax", lp.op.type
            fetches["mlm_logits"] = mlm_log_probs.op.inputs[0]
            fetches["mlm_log_probs"] = mlm_log_probs
            fetches["nsp_logits"] = nsp_log_probs.op.inputs[0]
            fetches["nsp_log_probs"] = nsp_log_probs

        overwrite, assign_ops = _constant_overwrites(v1, seed) if randomize_constants else ({}, [])

        saver = v1.train.Saver(var_list=v1.global_variables(), max_to_keep=None)
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            if assign_ops:
                sess.run(assign_ops, feed_dict=overwrite)
            out = sess.run(fetches, feed_dict=feed)
            saver.save(
                sess, os.path.join(out_dir, "bert_model.ckpt"), write_meta_graph=True, write_state=False
            )

    with open(os.path.join(out_dir, "bert_config.json"), "w", encoding="utf-8") as f:
        f.write(bert_config.to_json_string())
    with open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in make_vocab(full["vocab_size"])))

    if with_heads:
        vocab = full["vocab_size"]
        n_pred = masked_positions.shape[1]
        out["mlm_logits"] = out["mlm_logits"].reshape(batch, n_pred, vocab)
        out["mlm_log_probs"] = out["mlm_log_probs"].reshape(batch, n_pred, vocab)
    return {k: np.asarray(v, dtype=np.float32) for k, v in out.items()}


def _checked_positions(masked_positions, batch, seq_len):
    """`masked_positions` as int32 [B, P] inside [0, T); position 1 of every row when None."""
    if masked_positions is None:
        masked_positions = np.ones([batch, 1], dtype=np.int32)
    masked_positions = np.asarray(masked_positions, dtype=np.int32)
    if masked_positions.ndim != 2 or masked_positions.shape[0] != batch:
        raise ValueError("masked_positions must be [B, P]")
    if masked_positions.min() < 0 or masked_positions.max() >= seq_len:
        raise ValueError("masked_positions out of range [0, T)")
    return masked_positions


def _constant_overwrites(v1, seed):
    """(feed, assign ops) that overwrite the graph's biases, betas and gammas with seeded values
    (see write_google_checkpoint's randomize_constants)."""
    overwrite, assign_ops = {}, []
    rng = np.random.default_rng(seed)
    for var in sorted(v1.global_variables(), key=lambda v: v.op.name):
        name = var.op.name
        shape = var.shape.as_list()
        if name.endswith("/gamma"):
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith(("/bias", "/beta", "/output_bias")):
            value = 0.1 * rng.standard_normal(shape)
        else:
            continue
        ph = v1.placeholder(var.dtype.base_dtype, shape)
        overwrite[ph] = value.astype(np.float32)
        assign_ops.append(v1.assign(var, ph))
    return overwrite, assign_ops


def _main():  # pragma: no cover - manual use: python -m tests.checkpoints.google_reference DIR
    import sys

    out_dir = sys.argv[1] if len(sys.argv) > 1 else "google_tiny_bert"
    cfg = dict(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=2,
    )
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, size=(2, 8))
    res = write_google_checkpoint(
        out_dir, cfg, ids, np.zeros_like(ids), np.ones_like(ids), masked_positions=[[1, 2], [3, 4]]
    )
    print(json.dumps({k: list(v.shape) for k, v in res.items()}))
    tf = _tf()
    for name, shape in tf.train.list_variables(os.path.join(out_dir, "bert_model.ckpt")):
        print(name, shape)


if __name__ == "__main__":  # pragma: no cover
    _main()
