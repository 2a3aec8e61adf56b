"""Running tests/backends/' child scripts on Keras' JAX and PyTorch backends, in the side venvs
(no TensorFlow there; tests/side_venv.py), and the inputs the TensorFlow side compares on."""

import json

import numpy as np

from tests.side_venv import run_in_side_venv

VENVS = {"jax": ".venv-jax", "torch": ".venv-torch"}
# XLA's LLVM back end at -O0: the children compile dozens of tiny programs (a train step per
# head, the op-by-op eager calls) and run each a few times, so LLVM's optimisation passes were
# most of their time (a tiny classifier's 3-epoch fit: 11.6 CPU-s at the default level, 4.1 at
# 0). The HLO, hence what is computed and every shape or dtype error, is the same.
JAX_XLA_FLAGS = "--xla_backend_optimization_level=0"
# PyTorch on one CPU thread: the children's tensors are tiny (a 16-wide model, 48 sentences),
# and a second OpenMP thread only spun waiting for work, on CI's two shared cores (the
# workout: 40 CPU-s with the default threads, 14 with one).
TORCH_THREADS = "1"


def run_backend_child(backend, script, *args, xla_flags=(), timeout=900):
    """Runs `script` with `args` on `backend` in its side venv; returns its stdout. `xla_flags`:
    more XLA_FLAGS for JAX (e.g. a count of host devices)."""
    env = {"KERAS_BACKEND": backend}
    if backend == "jax":
        env["XLA_FLAGS"] = " ".join([JAX_XLA_FLAGS, *xla_flags])
    if backend == "torch":
        env["OMP_NUM_THREADS"] = TORCH_THREADS
    return run_in_side_venv(VENVS[backend], script, *args, env=env, timeout=timeout)


def last_json(stdout):
    """The JSON report a child prints last."""
    return json.loads(stdout.strip().splitlines()[-1])


def ragged_ids(rows=6, length=10, vocabulary=40, seed=1):
    """Classifier inputs with rows of different lengths (ids below `vocabulary`, padded with 0)."""
    rng = np.random.default_rng(seed)
    mask = (np.arange(length)[None] < rng.integers(3, length + 1, (rows, 1))).astype("int32")
    return {
        "token_ids": rng.integers(1, vocabulary, (rows, length)).astype("int32") * mask,
        "segment_ids": np.zeros((rows, length), "int32"),
        "padding_mask": mask,
    }


def run_on_jax_with_inputs(script, folder):
    """Runs `script FOLDER FOLDER/inputs.npz` on JAX with `ragged_ids()` saved there (the child
    writes its outputs on them next to it); returns (its JSON report, the inputs)."""
    inputs = ragged_ids()
    np.savez(folder / "inputs.npz", **inputs)
    out = run_backend_child("jax", script, str(folder), str(folder / "inputs.npz"), timeout=600)
    return last_json(out), inputs
