"""Self-check of tests/checkpoints/google_reference.py (the writer only).

Proves that Google's code runs under the shim, that the checkpoint has the
release layout and variable names, and that the returned arrays are what
their names say.  It does not test keras_bert_impl.
"""

import json
import math
import os

import numpy as np
import pytest

import tensorflow as tf  # noqa: E402

from tests.checkpoints import google_reference as gr  # noqa: E402

TINY = dict(
    vocab_size=100,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    type_vocab_size=2,
)
B, T, P = 2, 8, 3


def _inputs():
    rng = np.random.default_rng(123)
    ids = rng.integers(15, 100, size=(B, T)).astype(np.int32)
    ids[:, 0] = 12  # [CLS] in the tiny vocab
    seg = np.zeros((B, T), np.int32)
    seg[:, T // 2 :] = 1
    mask = np.ones((B, T), np.int32)
    mask[1, 5:] = 0  # second row padded
    pos = np.array([[1, 3, 6], [2, 4, 4]], np.int32)
    return ids, seg, mask, pos


def expected_variables(cfg, with_heads=True):
    H, INTER, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    ev = {
        "bert/embeddings/word_embeddings": [V, H],
        "bert/embeddings/token_type_embeddings": [cfg["type_vocab_size"], H],
        "bert/embeddings/position_embeddings": [cfg["max_position_embeddings"], H],
        "bert/embeddings/LayerNorm/beta": [H],
        "bert/embeddings/LayerNorm/gamma": [H],
        "bert/pooler/dense/kernel": [H, H],
        "bert/pooler/dense/bias": [H],
    }
    for i in range(cfg["num_hidden_layers"]):
        p = "bert/encoder/layer_%d/" % i
        for qkv in ("query", "key", "value"):
            ev[p + "attention/self/%s/kernel" % qkv] = [H, H]
            ev[p + "attention/self/%s/bias" % qkv] = [H]
        ev[p + "attention/output/dense/kernel"] = [H, H]
        ev[p + "attention/output/dense/bias"] = [H]
        ev[p + "attention/output/LayerNorm/beta"] = [H]
        ev[p + "attention/output/LayerNorm/gamma"] = [H]
        ev[p + "intermediate/dense/kernel"] = [H, INTER]
        ev[p + "intermediate/dense/bias"] = [INTER]
        ev[p + "output/dense/kernel"] = [INTER, H]
        ev[p + "output/dense/bias"] = [H]
        ev[p + "output/LayerNorm/beta"] = [H]
        ev[p + "output/LayerNorm/gamma"] = [H]
    if with_heads:
        ev.update(
            {
                "cls/predictions/transform/dense/kernel": [H, H],
                "cls/predictions/transform/dense/bias": [H],
                "cls/predictions/transform/LayerNorm/beta": [H],
                "cls/predictions/transform/LayerNorm/gamma": [H],
                "cls/predictions/output_bias": [V],
                "cls/seq_relationship/output_weights": [2, H],
                "cls/seq_relationship/output_bias": [2],
            }
        )
    return ev


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp("google_tiny"))
    ids, seg, mask, pos = _inputs()
    res = gr.write_google_checkpoint(out_dir, TINY, ids, seg, mask, masked_positions=pos, seed=0)
    return out_dir, res


def _ckpt(out_dir):
    return os.path.join(out_dir, "bert_model.ckpt")


def test_release_layout(written):
    out_dir, _ = written
    files = sorted(os.listdir(out_dir))
    assert files == [
        "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
        "bert_model.ckpt.meta",
        "vocab.txt",
    ]
    with open(os.path.join(out_dir, "bert_config.json")) as f:
        cfg = json.load(f)
    assert set(cfg) == set(gr.GOOGLE_CONFIG_DEFAULTS)
    for k, v in TINY.items():
        assert cfg[k] == v
    assert cfg["hidden_act"] == "gelu"
    with open(os.path.join(out_dir, "vocab.txt")) as f:
        vocab = f.read().splitlines()
    assert len(vocab) == TINY["vocab_size"] == len(set(vocab))
    assert vocab[0] == "[PAD]" and vocab[1] == "[unused0]"
    assert vocab[11:15] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_variable_names_and_shapes(written):
    out_dir, _ = written
    got = dict(tf.train.list_variables(_ckpt(out_dir)))
    assert got == expected_variables(TINY)
    assert got["bert/encoder/layer_0/attention/self/query/kernel"] == [32, 32]


def test_output_shapes_finite(written):
    _, res = written
    H, V, L = TINY["hidden_size"], TINY["vocab_size"], TINY["num_hidden_layers"]
    shapes = {
        "embedding_output": (B, T, H),
        "all_encoder_layers": (L, B, T, H),
        "sequence_output": (B, T, H),
        "pooled_output": (B, H),
        "mlm_logits": (B, P, V),
        "mlm_log_probs": (B, P, V),
        "nsp_logits": (B, 2),
        "nsp_log_probs": (B, 2),
    }
    assert {k: v.shape for k, v in res.items()} == shapes
    for k, v in res.items():
        assert v.dtype == np.float32 and np.all(np.isfinite(v)), k
    np.testing.assert_array_equal(res["all_encoder_layers"][-1], res["sequence_output"])


def test_outputs_agree_with_checkpoint_values(written):
    """The fetched tensors are logits/pooled outputs of the saved weights."""
    out_dir, res = written
    r = tf.train.load_checkpoint(_ckpt(out_dir))
    t = r.get_tensor
    # Constants were randomised (no zero biases / unit gammas).
    assert np.abs(t("bert/pooler/dense/bias")).max() > 0.01
    assert np.abs(t("bert/embeddings/LayerNorm/gamma") - 1).max() > 0.01
    pooled = np.tanh(
        res["sequence_output"][:, 0] @ t("bert/pooler/dense/kernel") + t("bert/pooler/dense/bias")
    )
    np.testing.assert_allclose(res["pooled_output"], pooled, atol=1e-5)
    nsp = res["pooled_output"] @ t("cls/seq_relationship/output_weights").T + t(
        "cls/seq_relationship/output_bias"
    )
    np.testing.assert_allclose(res["nsp_logits"], nsp, atol=1e-5)
    for lg, lp in (("mlm_logits", "mlm_log_probs"), ("nsp_logits", "nsp_log_probs")):
        x = res[lg].astype(np.float64)
        ref = x - x.max(-1, keepdims=True)
        ref = ref - np.log(np.exp(ref).sum(-1, keepdims=True))
        np.testing.assert_allclose(res[lp], ref, atol=1e-5)


def test_seeded_and_heads_optional(tmp_path, written):
    out_dir, res = written
    ids, seg, mask, pos = _inputs()
    again = gr.write_google_checkpoint(
        str(tmp_path / "same"), TINY, ids, seg, mask, masked_positions=pos, seed=0
    )
    for k in res:
        np.testing.assert_array_equal(res[k], again[k])
    other = gr.write_google_checkpoint(
        str(tmp_path / "other"), TINY, ids, seg, mask, seed=1, with_heads=False
    )
    assert set(other) == {"embedding_output", "all_encoder_layers", "sequence_output", "pooled_output"}
    assert not np.allclose(other["sequence_output"], res["sequence_output"])
    got = dict(tf.train.list_variables(str(tmp_path / "other" / "bert_model.ckpt")))
    assert got == expected_variables(TINY, with_heads=False)


def _run_google(fn, x):
    g = tf.Graph()
    with g.as_default():
        y = fn(tf.constant(x, tf.float32))
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return sess.run(y)


def test_google_gelu_is_tanh_approximation():
    modeling = gr.load_google_modeling()
    x = np.linspace(-4, 4, 81).astype(np.float32)
    y = _run_google(modeling.gelu, x)
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    erf_form = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    np.testing.assert_allclose(y, tanh_form, atol=1e-6)
    assert np.abs(y - erf_form).max() > 1e-4  # the two forms are distinguishable


def test_google_layer_norm_epsilon_is_tiny():
    """contrib/tf_slim layer_norm: variance_epsilon = 1e-12 (float32)."""
    modeling = gr.load_google_modeling()
    x = np.array([[1e-3, -1e-3, 1e-3, -1e-3]], np.float32)  # variance 1e-6
    y = _run_google(lambda t: modeling.layer_norm(t, name="ln"), x)
    # eps=1e-12 -> +-1; eps=1e-5 (Keras-style) would give +-0.30
    np.testing.assert_allclose(y, np.sign(x), atol=1e-4)
