"""gelu(h + bias), BERT's exact (erf) GELU after the intermediate GEMM, as one Pallas kernel
with a backward kernel of its own.

Through `keras.ops` XLA runs the bias add and the exact GELU as elementwise passes over the
[tokens, 4H] intermediate, forward and backward (15.0 ms of an H100 step at batch 512,
`bench/gpu/attribute_hlo.py`): here one kernel reads the GEMM's output and writes the
activation, and one reads the cotangent and the GEMM's output and writes the pre-activation's
gradient; the bias' gradient is its column sum, which XLA reduces.

Pallas' Triton lowering has no erf, so the kernel computes it with the rational approximation
XLA and Eigen use for float32 erf (clamped to [-4, 4]; within 1e-7 of it), on a GPU and in the
CPU tests alike. The arrays are read flat in power-of-2 blocks, the bias by column index.
"""

import functools
import math

try:
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
except ModuleNotFoundError:  # a TensorFlow-only install: importable (tests walk every module), never called
    jax = jnp = pl = plgpu = None

BLOCK = 4096
_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def erf(x):
    """float32 erf as a ratio of odd and even polynomials (Eigen's and XLA's coefficients)."""
    x = jnp.clip(x, -4.0, 4.0)
    x2 = x * x
    p = x2 * -2.72614225801306e-10 + 2.77068142495902e-08
    p = p * x2 + -2.10102402082508e-06
    p = p * x2 + -5.69250639462346e-05
    p = p * x2 + -7.34990630326855e-04
    p = p * x2 + -2.95459980854025e-03
    p = p * x2 + -1.60960333262415e-02
    q = x2 * -1.45660718464996e-05 + -2.13374055278905e-04
    q = q * x2 + -1.68282697438203e-03
    q = q * x2 + -7.37332916720468e-03
    q = q * x2 + -1.42647390514189e-02
    return x * p / q


def _load(h_ref, bias_ref, *, size, width, block):
    offsets = pl.program_id(0) * block + jnp.arange(block)
    inside = offsets < size
    h = plgpu.load(h_ref.at[offsets], mask=inside, other=0.0).astype(jnp.float32)
    bias = plgpu.load(bias_ref.at[offsets % width], mask=inside, other=0.0).astype(jnp.float32)
    return offsets, inside, h + bias


def _forward_kernel(h_ref, bias_ref, y_ref, *, size, width, block):
    offsets, inside, u = _load(h_ref, bias_ref, size=size, width=width, block=block)
    y = 0.5 * u * (1.0 + erf(u * _SQRT_HALF))
    plgpu.store(y_ref.at[offsets], y.astype(y_ref.dtype), mask=inside)


def _backward_kernel(h_ref, bias_ref, dy_ref, dh_ref, *, size, width, block):
    offsets, inside, u = _load(h_ref, bias_ref, size=size, width=width, block=block)
    dy = plgpu.load(dy_ref.at[offsets], mask=inside, other=0.0).astype(jnp.float32)
    derivative = 0.5 * (1.0 + erf(u * _SQRT_HALF)) + u * jnp.exp(-0.5 * u * u) * _INV_SQRT_2PI
    plgpu.store(dh_ref.at[offsets], (dy * derivative).astype(dh_ref.dtype), mask=inside)


def _call(kernel, operands, out_dtype, width, interpret, name):
    size = operands[0].size
    if size >= 2**31:
        raise ValueError(
            f"The fused GELU kernel indexes in int32; {size} values are too many. "
            "Use a smaller batch or fused_kernels=False."
        )
    call = pl.pallas_call(
        functools.partial(kernel, size=size, width=width, block=BLOCK),
        grid=(pl.cdiv(size, BLOCK),),
        out_shape=jax.ShapeDtypeStruct((size,), out_dtype),
        compiler_params=plgpu.CompilerParams(num_warps=8),
        interpret=interpret,
        name=name,
    )
    return call(*operands)


def bias_gelu(h, bias, interpret=False):
    """Exact GELU of h + bias. h: [..., I] (computed in float32, returned in h's dtype); bias: [I].
    interpret: Pallas' interpreter (any JAX device) instead of Triton (a GPU)."""
    return _differentiable()(h, bias, interpret)


@functools.cache
def _differentiable():
    """The kernel pair as one function JAX can differentiate (built on first use: JAX is imported
    only where the kernels run)."""
    function = jax.custom_vjp(
        lambda h, bias, interpret: _forward_rule(h, bias, interpret)[0], nondiff_argnums=(2,)
    )
    function.defvjp(_forward_rule, _backward_rule)
    return function


def _forward_rule(h, bias, interpret):
    if h.shape[-1] != bias.shape[-1] or bias.ndim != 1:
        raise ValueError(
            f"bias must be [{h.shape[-1]}], the last axis of h. Received: bias {bias.shape}, h {h.shape}."
        )
    y = _call(_forward_kernel, (jnp.reshape(h, (-1,)), bias), h.dtype, h.shape[-1], interpret, "bias_gelu")
    return jnp.reshape(y, h.shape), (h, bias)


def _backward_rule(interpret, saved, dy):
    h, bias = saved
    width = h.shape[-1]
    dh = _call(
        _backward_kernel,
        (jnp.reshape(h, (-1,)), bias, jnp.reshape(dy, (-1,))),
        h.dtype,
        width,
        interpret,
        "bias_gelu_backward",
    )
    dbias = jnp.sum(jnp.reshape(dh, (-1, width)).astype(jnp.float32), axis=0).astype(bias.dtype)
    return jnp.reshape(dh, h.shape), dbias
