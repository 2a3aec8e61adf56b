"""Whether the layers' `fused_kernels` option takes the Pallas kernels: plain Python until it
must ask JAX, so TensorFlow and PyTorch never import JAX through it."""

import os

import keras

# Set to 1 to run the kernels on JAX's CPU backend through Pallas' interpreter (the tests: the
# kernels then run as the same jaxpr, only interpreted, so their numbers can be checked without a GPU).
INTERPRET_VARIABLE = "KBERT_PALLAS_INTERPRET"


def fused_kernels_run(*tensors):
    """True on the JAX backend on a GPU, or with KBERT_PALLAS_INTERPRET=1 on any JAX device, for
    `tensors` of known shapes. Keras traces a functional model's graph with symbolic dimensions,
    which a Pallas grid cannot take: that trace (shapes only) takes the keras.ops path."""
    if keras.backend.backend() != "jax":
        return False
    import jax

    if not (jax.default_backend() == "gpu" or os.environ.get(INTERPRET_VARIABLE) == "1"):
        return False
    return all(isinstance(dimension, int) for tensor in tensors for dimension in tensor.shape)


def interpret_mode():
    """Pallas' interpreter everywhere but a GPU (the kernels lower through Triton there only)."""
    import jax

    return jax.default_backend() != "gpu"
