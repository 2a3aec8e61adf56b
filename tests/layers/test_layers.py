"""Every layer through the shared harness, plus the mask properties."""

import keras
import numpy as np
import pytest

from keras_bert_impl.layers import (
    BertEmbeddings,
    BertPooler,
    FeedForward,
    MaskedLMHead,
    MultiHeadAttention,
    NextSentenceHead,
    TransformerEncoder,
)
from keras_bert_impl.layers.bert_embeddings import sinusoidal_positions
from tests.harness import run_layer_test

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 5, 8)).astype("float32")
MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "int32")


@pytest.mark.parametrize("position_embedding", ["learned", "sinusoidal"])
def test_embeddings(position_embedding):
    ids = RNG.integers(0, 20, (2, 5)).astype("int32")
    run_layer_test(
        BertEmbeddings,
        dict(vocabulary_size=20, hidden_dim=8, max_sequence_length=6, position_embedding=position_embedding),
        (ids, np.zeros_like(ids)),
        expected_shape=(2, 5, 8),
    )


def test_sinusoidal_matches_transformer_formula():
    pe = keras.ops.convert_to_numpy(sinusoidal_positions(10, 6))
    pos, i = 7, 2  # column 2i and 2i+1
    angle = pos / 10000 ** (2 * i / 6)
    np.testing.assert_allclose(pe[pos, 2 * i], np.sin(angle), atol=1e-6)
    np.testing.assert_allclose(pe[pos, 2 * i + 1], np.cos(angle), atol=1e-6)


def test_attention():
    run_layer_test(
        MultiHeadAttention,
        dict(num_heads=2, hidden_dim=8),
        (X,),
        dict(padding_mask=MASK),
        expected_shape=(2, 5, 8),
    )


def test_cross_attention_shapes_and_reference():
    layer = MultiHeadAttention(num_heads=2, hidden_dim=8)
    memory = RNG.normal(size=(2, 3, 6)).astype("float32")
    out, probs = layer(X, memory, return_attention_scores=True)
    assert out.shape == (2, 5, 8) and probs.shape == (2, 2, 5, 3)
    # Recompute softmax(QK^T/sqrt(d))V by hand from the layer's own kernels.
    w = {
        d.name: (d.kernel.numpy(), d.bias.numpy())
        for d in (layer.query_dense, layer.key_dense, layer.value_dense, layer.output_dense)
    }
    q = (X @ w["query"][0] + w["query"][1]).reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)
    k = (memory @ w["key"][0] + w["key"][1]).reshape(2, 3, 2, 4).transpose(0, 2, 1, 3)
    v = (memory @ w["value"][0] + w["value"][1]).reshape(2, 3, 2, 4).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / 2.0
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(2, 5, 8)
    np.testing.assert_allclose(probs.numpy(), p, atol=1e-6)
    np.testing.assert_allclose(
        out.numpy(), ctx @ w["attention_output"][0] + w["attention_output"][1], atol=1e-5
    )


def _keras_attention_like(layer, memory_dim):
    """keras.layers.MultiHeadAttention (Keras's, not ours) holding `layer`'s weights."""
    heads, width = layer.num_heads, layer.hidden_dim // layer.num_heads
    reference = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=width)
    reference(np.zeros((1, 1, layer.hidden_dim), "float32"), np.zeros((1, 1, memory_dim), "float32"))
    for theirs, ours, rows in (
        (reference._query_dense, layer.query_dense, layer.hidden_dim),
        (reference._key_dense, layer.key_dense, memory_dim),
        (reference._value_dense, layer.value_dense, memory_dim),
    ):
        theirs.set_weights(
            [ours.kernel.numpy().reshape(rows, heads, width), ours.bias.numpy().reshape(heads, width)]
        )
    reference._output_dense.set_weights(
        [
            layer.output_dense.kernel.numpy().reshape(heads, width, layer.hidden_dim),
            layer.output_dense.bias.numpy(),
        ]
    )
    return reference


@pytest.mark.parametrize("case", ["cross_padding", "self_causal_padding", "cross_attention_mask"])
def test_attention_matches_keras_multi_head_attention(case):
    layer = MultiHeadAttention(num_heads=2, hidden_dim=8)
    memory = X if case == "self_causal_padding" else RNG.normal(size=(2, 3, 6)).astype("float32")
    layer(X, memory)
    reference = _keras_attention_like(layer, memory.shape[-1])
    if case == "cross_attention_mask":
        mask = RNG.integers(0, 2, (2, 5, 3)).astype(bool)
        mask[..., 0] = True  # every query keeps one key
        ours = dict(attention_mask=mask)
        theirs = dict(attention_mask=mask)
    else:
        padding = MASK if case == "self_causal_padding" else np.array([[1, 1, 0], [1, 0, 0]], "int32")
        causal = case == "self_causal_padding"
        ours = dict(padding_mask=padding, use_causal_mask=causal)
        theirs = dict(
            attention_mask=np.broadcast_to(padding[:, None, :].astype(bool), (2, 5, memory.shape[1])),
            use_causal_mask=causal,
        )
    out, probs = layer(X, memory, return_attention_scores=True, **ours)
    want_out, want_probs = reference(X, memory, return_attention_scores=True, **theirs)
    np.testing.assert_allclose(probs.numpy(), want_probs.numpy(), atol=1e-6)
    np.testing.assert_allclose(out.numpy(), want_out.numpy(), atol=1e-5)


def test_causal_mask_blocks_every_future_position():
    layer = MultiHeadAttention(num_heads=2, hidden_dim=8)
    _, probs = layer(X, use_causal_mask=True, return_attention_scores=True)
    probs = probs.numpy()
    future = np.triu(np.ones((5, 5), bool), k=1)
    assert np.all(probs[:, :, future] == 0.0)
    assert np.all(probs[:, :, ~future] > 0.0)
    # And outputs at position i do not move when later tokens change.
    changed = X.copy()
    changed[:, 3:] += 10.0
    a = layer(X, use_causal_mask=True).numpy()
    b = layer(changed, use_causal_mask=True).numpy()
    np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-6)
    assert np.abs(a[:, 3:] - b[:, 3:]).max() > 1e-3


def test_padding_mask_gives_zero_probability_to_padding():
    _, probs = MultiHeadAttention(num_heads=2, hidden_dim=8)(
        X, padding_mask=MASK, return_attention_scores=True
    )
    assert np.all(probs.numpy()[0, :, :, 3:] == 0.0)


def test_feed_forward():
    run_layer_test(FeedForward, dict(intermediate_dim=16), (X,), expected_shape=(2, 5, 8))


@pytest.mark.parametrize("activation", ["gelu", "gelu_approximate"])
def test_gelu_forms(activation):
    from math import erf, pi, sqrt, tanh

    from keras_bert_impl.layers.activations import get_activation

    xs = np.linspace(-4, 4, 17).astype("float32")
    got = keras.ops.convert_to_numpy(get_activation(activation)(xs))
    if activation == "gelu":
        ref = [0.5 * v * (1 + erf(v / sqrt(2))) for v in xs]
    else:
        ref = [0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v**3))) for v in xs]
    np.testing.assert_allclose(got, ref, atol=1e-6)


def test_transformer_encoder():
    run_layer_test(
        TransformerEncoder,
        dict(num_heads=2, intermediate_dim=16),
        (X,),
        dict(padding_mask=MASK),
        expected_shape=(2, 5, 8),
    )


def test_transformer_encoder_is_post_layer_norm():
    block = TransformerEncoder(num_heads=2, intermediate_dim=16, dropout=0.0)
    out = block(X).numpy()
    attended = block.attention(X).numpy()
    h = block.attention_layer_norm(X + attended).numpy()
    expected = block.output_layer_norm(h + block.feed_forward(h).numpy()).numpy()
    np.testing.assert_allclose(out, expected, atol=1e-5)
    # Post-LN: every output row is normalised (mean 0, unit variance before gamma/beta = 1/0).
    np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-5)


def test_pooler():
    run_layer_test(BertPooler, {}, (X,), expected_shape=(2, 8))


def test_next_sentence_head():
    run_layer_test(NextSentenceHead, {}, (X[:, 0],), expected_shape=(2, 2))


def test_masked_lm_head_tied_to_embedding():
    embedding = keras.layers.Embedding(30, 8)
    embedding.build((None,))
    positions = np.array([[0, 2], [4, 1]], "int32")
    mixed_embedding = keras.layers.Embedding(30, 8, dtype="mixed_bfloat16")
    mixed_embedding.build((None,))
    run_layer_test(
        MaskedLMHead,
        dict(token_embedding=embedding),
        (X, positions),
        expected_shape=(2, 2, 30),
        mixed_init_kwargs=dict(token_embedding=mixed_embedding),
    )
    head = MaskedLMHead(embedding)
    logits = head(X, positions).numpy()
    gathered = np.stack([X[0, [0, 2]], X[1, [4, 1]]])
    hidden = head.layer_norm(head.dense(gathered)).numpy()
    np.testing.assert_allclose(
        logits, hidden @ embedding.embeddings.numpy().T + head.output_bias.numpy(), atol=1e-5
    )
    # dense kernel+bias, LN gamma+beta, output bias, and E itself (shared, not copied).
    assert len(head.trainable_weights) == 6
    assert any(w is embedding.embeddings for w in head.trainable_weights)


def test_bad_arguments_quote_the_value():
    with pytest.raises(ValueError, match="hidden_dim=10, num_heads=3"):
        MultiHeadAttention(num_heads=3, hidden_dim=10)
    with pytest.raises(ValueError, match="activation"):
        FeedForward(16, activation="swishy")
    with pytest.raises(ValueError, match="position_embedding"):
        BertEmbeddings(10, 8, position_embedding="rotary")
