"""LayerNorm(residual + Dropout(x)) as one Pallas kernel, with a backward kernel of its own.

BERT's post-LN block ends every sublayer with `LayerNorm(residual + Dropout(sublayer(x)))`.
Through `keras.ops` XLA runs that as several passes over the [tokens, H] activations (the
dropout mask's random bits, compare and select; the add; LayerNorm's float32 statistics; and
as many again backward: `bench/gpu/attribute_hlo.py` put them at 20.8 ms of an H100 step). Here
one kernel reads x and the residual once and writes the output and the pre-norm sum; the
backward kernel reads the cotangent and that sum and writes both input gradients.

The dropout mask is never stored: it is a counter-based hash of (seed, row * H + column),
drawn again in the backward kernel from the same seed, so forward and backward agree by
construction. Its keep rate is exact to 2^-32 (kept where the hash's 32 bits >= rate * 2^32).

One program per row: a row of H <= 8192 values sits in registers (Triton's loads take
power-of-2 blocks, so the row is read as the next power of two with the excess masked).
`pallas_call` has no autodiff, hence `jax.custom_vjp`; gamma's and beta's gradients are one
column reduction each, which XLA runs from the saved sum and statistics.
"""

import functools

try:
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
except ModuleNotFoundError:  # a TensorFlow-only install: importable (tests walk every module), never called
    jax = jnp = lax = pl = plgpu = None

MAX_WIDTH = 8192


def _fmix32(h):
    """MurmurHash3's 32-bit finalizer: every input bit flips each output bit with probability ~1/2."""
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def dropout_threshold(rate):
    """The uint32 the hash must reach to keep an element: rate * 2^32, rounded."""
    return min(int(round(rate * 2.0**32)), 2**32 - 1)


def keep_mask(seed, row, columns, width, rate):
    """Which elements of `row` dropout keeps: True where hash(seed, row * width + column) >=
    rate * 2^32. `seed` an int32 scalar, `row` an int scalar, `columns` an int array."""
    key = _fmix32(seed.astype(jnp.uint32) ^ jnp.uint32(0x9E3779B9))
    index = jnp.asarray(row).astype(jnp.uint32) * jnp.uint32(width) + columns.astype(jnp.uint32)
    bits = _fmix32(_fmix32(index ^ key) + key)
    return bits >= jnp.uint32(dropout_threshold(rate))


def _block(width):
    if width > MAX_WIDTH:
        raise ValueError(
            f"The fused LayerNorm kernel takes rows of at most {MAX_WIDTH} values. "
            f"Received: width={width}. "
            "Build the model with fused_kernels=False."
        )
    return pl.next_power_of_2(width)


def _warps(block):
    return min(max(block // 256, 1), 8)


def _forward_kernel(
    seed_ref,
    x_ref,
    residual_ref,
    gamma_ref,
    beta_ref,
    y_ref,
    z_ref,
    mean_ref,
    rstd_ref,
    *,
    width,
    block,
    rate,
    epsilon,
):
    row = pl.program_id(0)
    columns = jnp.arange(block)
    inside = columns < width
    x = plgpu.load(x_ref.at[columns], mask=inside, other=0.0).astype(jnp.float32)
    residual = plgpu.load(residual_ref.at[columns], mask=inside, other=0.0).astype(jnp.float32)
    if rate > 0.0:
        keep = keep_mask(seed_ref[0], row, columns, width, rate)
        x = jnp.where(keep, x * (1.0 / (1.0 - rate)), 0.0)
    # The sum as it is stored (the residual's dtype), so that the backward kernel's statistics
    # are exactly the forward's; in float32 this rounds nothing.
    z = (x + residual).astype(z_ref.dtype).astype(jnp.float32)
    z = jnp.where(inside, z, 0.0)
    mean = jnp.sum(z) / width
    centered = jnp.where(inside, z - mean, 0.0)
    rstd = lax.rsqrt(jnp.sum(centered * centered) / width + epsilon)
    gamma = plgpu.load(gamma_ref.at[columns], mask=inside, other=0.0).astype(jnp.float32)
    beta = plgpu.load(beta_ref.at[columns], mask=inside, other=0.0).astype(jnp.float32)
    plgpu.store(y_ref.at[columns], (centered * rstd * gamma + beta).astype(y_ref.dtype), mask=inside)
    plgpu.store(z_ref.at[columns], z.astype(z_ref.dtype), mask=inside)
    mean_ref[...] = mean
    rstd_ref[...] = rstd


def _backward_kernel(seed_ref, dy_ref, z_ref, mean_ref, rstd_ref, gamma_ref, *out_refs, width, block, rate):
    dz_ref, dx_ref = out_refs if rate > 0.0 else (out_refs[0], None)
    row = pl.program_id(0)
    columns = jnp.arange(block)
    inside = columns < width
    dy = plgpu.load(dy_ref.at[columns], mask=inside, other=0.0).astype(jnp.float32)
    z = plgpu.load(z_ref.at[columns], mask=inside, other=0.0).astype(jnp.float32)
    gamma = plgpu.load(gamma_ref.at[columns], mask=inside, other=0.0).astype(jnp.float32)
    mean, rstd = mean_ref[...], rstd_ref[...]
    normalized = jnp.where(inside, (z - mean) * rstd, 0.0)
    scaled = gamma * dy
    dz = (scaled - normalized * (jnp.sum(normalized * scaled) / width) - jnp.sum(scaled) / width) * rstd
    plgpu.store(dz_ref.at[columns], dz.astype(dz_ref.dtype), mask=inside)
    if dx_ref is not None:
        keep = keep_mask(seed_ref[0], row, columns, width, rate)
        dx = jnp.where(keep, dz * (1.0 / (1.0 - rate)), 0.0)
        plgpu.store(dx_ref.at[columns], dx.astype(dx_ref.dtype), mask=inside)


def _row_spec(width):
    return pl.BlockSpec((None, width), lambda i: (i, 0))


def _whole_spec(shape):
    return pl.BlockSpec(shape, lambda i: (0,) * len(shape))


def _statistic_spec():
    return pl.BlockSpec((None,), lambda i: (i,))


def _check(x, residual, rate):
    if x.ndim != 2 or x.shape != residual.shape:
        raise ValueError(
            f"The fused LayerNorm kernel takes x and residual of one shape [tokens, H]. "
            f"Received: x {x.shape}, residual {residual.shape}."
        )
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"rate must be in [0, 1). Received: rate={rate!r}")
    if rate > 0.0 and x.shape[0] * x.shape[1] >= 2**32:
        raise ValueError(
            f"The dropout hash counts positions in 32 bits; [{x.shape[0]}, {x.shape[1]}] has more. "
            "Use a smaller batch or fused_kernels=False."
        )


def _forward(x, residual, gamma, beta, seed, rate, epsilon, interpret):
    _check(x, residual, rate)
    rows, width = x.shape
    block = _block(width)
    call = pl.pallas_call(
        functools.partial(
            _forward_kernel, width=width, block=block, rate=float(rate), epsilon=float(epsilon)
        ),
        grid=(rows,),
        in_specs=[
            _whole_spec((1,)),
            _row_spec(width),
            _row_spec(width),
            _whole_spec((width,)),
            _whole_spec((width,)),
        ],
        out_specs=[_row_spec(width), _row_spec(width), _statistic_spec(), _statistic_spec()],
        out_shape=[
            jax.ShapeDtypeStruct(x.shape, x.dtype),
            jax.ShapeDtypeStruct(x.shape, residual.dtype),
            jax.ShapeDtypeStruct((rows,), jnp.float32),
            jax.ShapeDtypeStruct((rows,), jnp.float32),
        ],
        compiler_params=plgpu.CompilerParams(num_warps=_warps(block)),
        interpret=interpret,
        name="residual_dropout_layer_norm",
    )
    y, z, mean, rstd = call(jnp.reshape(seed, (1,)).astype(jnp.int32), x, residual, gamma, beta)
    return y, (z, mean, rstd, gamma, jnp.reshape(seed, (1,)).astype(jnp.int32))


def residual_dropout_layer_norm(x, residual, gamma, beta, seed, rate, epsilon, interpret=False):
    """LayerNorm(residual + Dropout(x, rate)) * gamma + beta over the last axis of [tokens, H].

    x, residual: [tokens, H] (any float dtype; computed in float32, returned in x's dtype).
    gamma, beta: [H]. seed: an int32 scalar or [1]; the mask is a function of it and the
    position alone. rate, epsilon: Python floats (rate 0: no dropout). interpret: Pallas'
    interpreter (any JAX device) instead of Triton (a GPU).
    """
    return _differentiable()(x, residual, gamma, beta, seed, rate, epsilon, interpret)


@functools.cache
def _differentiable():
    """The kernel pair as one function JAX can differentiate (built on first use: JAX is imported
    only where the kernels run)."""
    function = jax.custom_vjp(lambda *args: _forward(*args)[0], nondiff_argnums=(5, 6, 7))
    function.defvjp(_forward_rule, _backward_rule)
    return function


def _forward_rule(x, residual, gamma, beta, seed, rate, epsilon, interpret):
    return _forward(x, residual, gamma, beta, seed, rate, epsilon, interpret)


def _backward_rule(rate, epsilon, interpret, saved, dy):
    z, mean, rstd, gamma, seed = saved
    rows, width = z.shape
    block = _block(width)
    dropped = rate > 0.0
    call = pl.pallas_call(
        functools.partial(_backward_kernel, width=width, block=block, rate=float(rate)),
        grid=(rows,),
        in_specs=[
            _whole_spec((1,)),
            _row_spec(width),
            _row_spec(width),
            _statistic_spec(),
            _statistic_spec(),
            _whole_spec((width,)),
        ],
        out_specs=[_row_spec(width)] * (2 if dropped else 1),
        out_shape=[jax.ShapeDtypeStruct(z.shape, z.dtype)]
        + ([jax.ShapeDtypeStruct(z.shape, dy.dtype)] if dropped else []),
        compiler_params=plgpu.CompilerParams(num_warps=_warps(block)),
        interpret=interpret,
        name="residual_dropout_layer_norm_backward",
    )
    outputs = call(seed, dy, z, mean, rstd, gamma)
    dz = outputs[0]
    dx = outputs[1] if dropped else dz.astype(dy.dtype)
    normalized = (z.astype(jnp.float32) - mean[:, None]) * rstd[:, None]
    dy32 = dy.astype(jnp.float32)
    dgamma = jnp.sum(dy32 * normalized, axis=0).astype(gamma.dtype)
    dbeta = jnp.sum(dy32, axis=0).astype(gamma.dtype)
    return dx, dz, dgamma, dbeta, None
