"""The Pallas kernels of keras_bert_impl.kernels on JAX's CPU backend, in Pallas' interpret mode
(KBERT_PALLAS_INTERPRET=1), against the keras.ops path; run by tests/backends/test_fused_kernels.py
in .venv-jax (no TensorFlow). Prints one JSON object of measured differences and counts; the test
holds them to their tolerances.

    python tests/backends/fused_kernels_child.py checks   (isolation, then kernels and dropout)
    python tests/backends/fused_kernels_child.py train
"""

import json
import os
import sys
import time

import numpy as np


def _max_difference(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


def _relative_difference(a, b):
    """max |a - b| / max |b|: the tolerance scale of a gradient whose entries span decades."""
    b32 = np.asarray(b, np.float32)
    return _max_difference(a, b) / max(float(np.max(np.abs(b32))), 1e-30)


def kernels():
    """Forward and gradients of each kernel against keras.ops (LayerNormalization of the residual
    sum, Dense's exact GELU), in float32 and with bfloat16 inputs (against the keras.ops path run
    on the same bfloat16 inputs under mixed_bfloat16, and against float32 for scale)."""
    import jax
    import jax.numpy as jnp
    import keras
    from keras import ops

    from keras_bert_impl.kernels.bias_gelu import bias_gelu, erf
    from keras_bert_impl.kernels.residual_layer_norm import keep_mask, residual_dropout_layer_norm

    rng = np.random.default_rng(0)
    rows, width, inner = 24, 48, 96  # widths not powers of two: the kernels' masked tails run
    report = {}
    for dtype in ("float32", "bfloat16"):
        policy = "float32" if dtype == "float32" else "mixed_bfloat16"
        x = jnp.asarray(rng.normal(size=(rows, width)), dtype)
        residual = jnp.asarray(rng.normal(size=(rows, width)) * 2.0, dtype)
        norm = keras.layers.LayerNormalization(epsilon=1e-12, dtype=policy)
        norm.build((rows, width))
        norm.gamma.assign(rng.normal(size=width).astype("float32"))
        norm.beta.assign(rng.normal(size=width).astype("float32"))
        gamma, beta = ops.convert_to_tensor(norm.gamma), ops.convert_to_tensor(norm.beta)
        probe = jnp.asarray(rng.normal(size=(rows, width)), jnp.float32)  # a random cotangent

        def fused(x, residual, gamma, beta):
            y = residual_dropout_layer_norm(x, residual, gamma, beta, jnp.int32(7), 0.0, 1e-12, True)
            return jnp.sum(y.astype(jnp.float32) * probe), y

        def reference(x, residual, gamma, beta):
            y, _ = norm.stateless_call([gamma, beta], [], residual + x)
            return jnp.sum(y.astype(jnp.float32) * probe), y

        operands = (x, residual, gamma, beta)
        (_, y_fused), grads_fused = jax.value_and_grad(fused, argnums=(0, 1, 2, 3), has_aux=True)(*operands)
        (_, y_ref), grads_ref = jax.value_and_grad(reference, argnums=(0, 1, 2, 3), has_aux=True)(*operands)
        report[f"layer_norm_{dtype}"] = {
            "forward": _max_difference(y_fused, y_ref),
            "output_dtype": str(y_fused.dtype),
            "reference_dtype": str(y_ref.dtype),
            "reference_max_abs": _max_difference(y_ref, 0.0),
            "gradients": {
                name: _relative_difference(a, b)
                for name, a, b in zip(("x", "residual", "gamma", "beta"), grads_fused, grads_ref)
            },
        }

        # Dropout inside: the reference applies the kernel's own mask (keep_mask, the hash the kernel
        # draws) with keras.ops, so this checks the kernel's arithmetic around the mask.
        rate = 0.25
        keep = keep_mask(jnp.int32(11), jnp.arange(rows)[:, None], jnp.arange(width)[None, :], width, rate)

        def fused_dropout(x, residual, gamma, beta):
            y = residual_dropout_layer_norm(x, residual, gamma, beta, jnp.int32(11), rate, 1e-12, True)
            return jnp.sum(y.astype(jnp.float32) * probe), y

        def reference_dropout(x, residual, gamma, beta):
            dropped = ops.where(keep, x / ops.cast(1.0 - rate, x.dtype), ops.zeros_like(x))
            y, _ = norm.stateless_call([gamma, beta], [], residual + dropped)
            return jnp.sum(y.astype(jnp.float32) * probe), y

        (_, y_fused), grads_fused = jax.value_and_grad(fused_dropout, argnums=(0, 1, 2, 3), has_aux=True)(
            x, residual, gamma, beta
        )
        (_, y_ref), grads_ref = jax.value_and_grad(reference_dropout, argnums=(0, 1, 2, 3), has_aux=True)(
            x, residual, gamma, beta
        )
        report[f"layer_norm_dropout_{dtype}"] = {
            "forward": _max_difference(y_fused, y_ref),
            "reference_max_abs": _max_difference(y_ref, 0.0),
            "gradients": {
                name: _relative_difference(a, b)
                for name, a, b in zip(("x", "residual", "gamma", "beta"), grads_fused, grads_ref)
            },
        }

        # Bias + exact GELU against keras.ops.gelu(approximate=False), the Dense activation's.
        h = jnp.asarray(rng.normal(size=(3, 8, inner)) * 3.0, dtype)
        bias = jnp.asarray(rng.normal(size=inner), dtype)
        probe_h = jnp.asarray(rng.normal(size=h.shape), jnp.float32)

        def fused_gelu(h, bias):
            y = bias_gelu(h, bias, True)
            return jnp.sum(y.astype(jnp.float32) * probe_h), y

        def reference_gelu(h, bias):
            y = ops.gelu(h + bias, approximate=False)
            return jnp.sum(y.astype(jnp.float32) * probe_h), y

        (_, g_fused), grads_fused = jax.value_and_grad(fused_gelu, argnums=(0, 1), has_aux=True)(h, bias)
        (_, g_ref), grads_ref = jax.value_and_grad(reference_gelu, argnums=(0, 1), has_aux=True)(h, bias)
        h32, bias32 = h.astype(jnp.float32), bias.astype(jnp.float32)
        report[f"gelu_{dtype}"] = {
            "forward": _max_difference(g_fused, g_ref),
            "output_dtype": str(g_fused.dtype),
            "reference_max_abs": _max_difference(g_ref, 0.0),
            "forward_vs_float32_reference": _max_difference(
                g_fused, ops.gelu(h32 + bias32, approximate=False)
            ),
            "gradients": {
                name: _relative_difference(a, b) for name, a, b in zip(("h", "bias"), grads_fused, grads_ref)
            },
        }
    grid = jnp.linspace(-6.0, 6.0, 200_001, dtype=jnp.float32)
    report["erf_max_difference"] = _max_difference(erf(grid), jax.lax.erf(grid))
    return report


def dropout():
    """The in-kernel dropout's statistics, read from the kernel's outputs alone: with x = 1,
    residual = 0, gamma = 1 and beta = 0 every kept position normalizes to one value above zero
    and every dropped one to one below, so the forward's mask is y > 0; the backward's is where
    the gradient of x is non-zero. Keras' own Dropout's keep rate on the same shape, beside it."""
    import jax
    import jax.numpy as jnp
    import keras

    from keras_bert_impl.kernels.residual_layer_norm import residual_dropout_layer_norm

    rows, width, rate = 256, 768, 0.1
    ones, zeros = jnp.ones((rows, width), jnp.float32), jnp.zeros((rows, width), jnp.float32)
    gamma, beta = jnp.ones((width,), jnp.float32), jnp.zeros((width,), jnp.float32)
    probe = jnp.asarray(np.random.default_rng(1).normal(size=(rows, width)), jnp.float32)

    def masks(seed):
        def loss(x):
            y = residual_dropout_layer_norm(x, zeros, gamma, beta, jnp.int32(seed), rate, 1e-12, True)
            return jnp.sum(y * probe), y

        (_, y), dx = jax.value_and_grad(loss, has_aux=True)(ones)
        return np.asarray(y) > 0, np.asarray(dx) != 0

    forward_0, backward_0 = masks(0)
    forward_1, _ = masks(1)
    keras_mask = (
        np.asarray(keras.layers.Dropout(rate, seed=0)(np.ones((rows, width), "float32"), training=True)) != 0
    )
    return {
        "positions": rows * width,
        "rate": rate,
        "keep_rate_seed_0": float(forward_0.mean()),
        "keep_rate_seed_1": float(forward_1.mean()),
        "keep_rate_keras_dropout": float(keras_mask.mean()),
        "forward_equals_backward": bool(np.array_equal(forward_0, backward_0)),
        "seeds_agree_fraction": float((forward_0 == forward_1).mean()),
        "rows_equal_to_row_0": int(sum(np.array_equal(forward_0[0], forward_0[i]) for i in range(1, rows))),
        "keep_rate_per_column_min_max": [float(forward_0.mean(0).min()), float(forward_0.mean(0).max())],
    }


def _pretraining_data(config, batch, length, predictions, steps):
    rng = np.random.default_rng(0)
    rows = batch * steps
    x = {
        "token_ids": rng.integers(5, config["vocabulary_size"], (rows, length)).astype("int32"),
        "segment_ids": np.repeat(
            np.r_[np.zeros(length // 2), np.ones(length - length // 2)][None], rows, 0
        ).astype("int32"),
        "padding_mask": np.ones((rows, length), "int32"),
        "mask_positions": np.sort(rng.integers(1, length - 1, (rows, predictions)), axis=1).astype("int32"),
    }
    x["padding_mask"][::2, -3:] = 0  # padded rows too: the attention's mask goes through the fused split
    y = {
        "mlm_logits": rng.integers(5, config["vocabulary_size"], (rows, predictions)),
        "nsp_logits": rng.integers(0, 2, rows),
    }
    return x, y


def train():
    """A tiny BertPretrainer (MLM + NSP, BertBackbone(fused_kernels=True)) trained with fit for a
    few steps, against the same model and data through keras.ops: per-step losses, at dropout 0
    (equal functions), and the fused model alone at BERT's 0.1 (its masks are its own: the losses
    only differ from dropout 0's and stay finite)."""
    import keras

    import keras_bert_impl as kb
    import keras_bert_impl.kernels.bias_gelu as bias_gelu_module
    import keras_bert_impl.kernels.residual_layer_norm as layer_norm_module
    from keras_bert_impl.training import create_optimizer

    calls = {"residual_dropout_layer_norm": 0, "bias_gelu": 0}

    def counted(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)

        setattr(module, name, wrapper)

    counted(layer_norm_module, "residual_dropout_layer_norm")
    counted(bias_gelu_module, "bias_gelu")
    config = dict(
        vocabulary_size=64,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=32,
    )
    batch, length, predictions, steps = 4, 16, 3, 4
    x, y = _pretraining_data(config, batch, length, predictions, steps)
    report = {}
    for dropout_rate, sides in ((0.0, (False, True)), (0.1, (True,))):
        losses, weights = {}, {}
        for fused in sides:
            keras.utils.set_random_seed(0)
            model = kb.BertPretrainer(kb.BertBackbone(**config, dropout=dropout_rate, fused_kernels=fused))
            model.compile(
                optimizer=create_optimizer(1e-3, train_steps=100, warmup_steps=0),
                loss=model.default_loss(),
                jit_compile=True,
            )
            batch_losses = []
            record = keras.callbacks.LambdaCallback(
                on_train_batch_end=lambda b, logs: batch_losses.append(float(logs["loss"]))
            )
            start = time.perf_counter()
            model.fit(x, y, batch_size=batch, epochs=2, shuffle=False, verbose=0, callbacks=[record])
            side = "fused" if fused else "keras_ops"
            losses[side] = batch_losses
            weights[side] = [keras.ops.convert_to_numpy(w) for w in model.weights]
            report[f"fit_s_dropout_{dropout_rate}_{side}"] = time.perf_counter() - start
        report[f"dropout_{dropout_rate}"] = losses
        if len(sides) == 2:
            report[f"dropout_{dropout_rate}_trained_weights_max_difference"] = max(
                _max_difference(a, b) for a, b in zip(weights["fused"], weights["keras_ops"])
            )
    report["kernel_calls_while_tracing"] = calls
    return report


def isolation():
    """What importing and running the library loads on JAX with the option off, and on with the
    kernels not asked to run (no GPU, no KBERT_PALLAS_INTERPRET)."""
    import keras

    import keras_bert_impl as kb

    # Keras' JAX backend imports Pallas itself (its splash attention): only our modules say anything
    def ours():
        return sorted(m for m in sys.modules if m.startswith("keras_bert_impl.kernels"))

    after_import = ours()
    config = dict(
        vocabulary_size=64,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
    )
    x, _ = _pretraining_data(config, 2, 8, 2, 1)
    x.pop("mask_positions")
    keras.utils.set_random_seed(0)
    plain = kb.BertBackbone(**config)
    plain_out = keras.ops.convert_to_numpy(plain(x)["sequence_output"])
    after_plain = ours()
    keras.utils.set_random_seed(0)
    asked = kb.BertBackbone(**config, fused_kernels=True)
    asked_out = keras.ops.convert_to_numpy(asked(x)["sequence_output"])
    return {
        "after_import": after_import,
        "after_default_model": after_plain,
        "after_fused_model_without_gpu": ours(),
        "fused_option_without_gpu_bitwise_equal": bool(np.array_equal(plain_out, asked_out)),
    }


def checks():
    """isolation() before anything imports the kernels (KBERT_PALLAS_INTERPRET unset for it),
    then kernels() and dropout() in interpret mode."""
    interpret = os.environ.pop("KBERT_PALLAS_INTERPRET", None)
    report = {"isolation": isolation()}
    os.environ["KBERT_PALLAS_INTERPRET"] = interpret or "1"
    for name, part in (("kernels", kernels), ("dropout", dropout)):
        started = time.perf_counter()
        report[name] = part()
        report[name]["seconds"] = time.perf_counter() - started
    return report


if __name__ == "__main__":
    started = time.perf_counter()
    report = {"checks": checks, "train": train}[sys.argv[1]]()
    report["seconds"] = time.perf_counter() - started
    print(json.dumps(report))
