"""keras_bert_impl: BERT built from its parts as Keras 3 layers."""

import os
import platform

# Keras 3 picks its backend at import time; this library's TensorFlow-side
# pieces (tokenization, export) need the TensorFlow backend.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# TensorFlow's C++ INFO lines (CUDA probing, oneDNN notes, end-of-sequence
# notices from tf.data) drown the progress bars; warnings and errors still show.
# On a machine without NVIDIA's driver the CUDA build of TensorFlow also logs
# "failed call to cuInit" as an error on every start, which can only mean "no GPU":
# there the default hides C++ errors too (Python exceptions still carry every
# failure). Only a default: a TF_CPP_MIN_LOG_LEVEL the user set wins. It must be
# set before TensorFlow is first imported, which is why it is here and not in cli.py.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2" if os.path.exists("/proc/driver/nvidia") else "3")
# TensorFlow 2.20 runs its oneDNN kernels on Linux x86 only where the CPU has AVX512-VNNI,
# AVX512-BF16, AVX-VNNI or AMX (`DefaultOneDnnPolicy`, core/util/port.cc), and Eigen's on the
# others. On the AVX2-only AMD EPYC, oneDNN's fused matmuls (bias and exact GELU in one kernel)
# made the fine-tuned MiniLM's batch-32 fp32 forward about 1.4x as fast as Eigen's, ahead of
# ONNX Runtime's (bench/perf/forward_gap.py, bench/results/forward_gap.json); on the CPUs that
# have those extensions it is on already, so every x86 CPU runs what our benches measured. Read
# once, when TensorFlow loads (hence here); a TF_ENABLE_ONEDNN_OPTS the user set wins.
if platform.machine().lower() in ("x86_64", "amd64"):
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

import sys  # noqa: E402


# The public names, and the module each comes from.
_PUBLIC = {
    "layers": None,
    **{
        name: "keras_bert_impl.models"
        for name in (
            "AttentionTerm",
            "BERT_PRESETS",
            "BertBackbone",
            "BertClassifier",
            "BertEmbedder",
            "BertPretrainer",
            "BertSpanLabeler",
            "BertTask",
            "BertTokenClassifier",
            "DISTILLATION_DEFAULTS",
            "DistillationArgumentError",
            "DistillationDefaults",
            "DistillationLoss",
            "DistillationTerm",
            "Distiller",
            "EmbeddingTerm",
            "GlobalBatchLoss",
            "HiddenStatesTerm",
            "LogitsTerm",
            "MaskedLMAccuracy",
            "MaskedSparseCrossentropy",
            "QuantizationAwareClassifier",
        )
    },
}
__all__ = sorted(_PUBLIC)


def __getattr__(name):
    """The public names, imported when first used (see below)."""
    import importlib

    if name not in _PUBLIC:
        raise AttributeError(f"module 'keras_bert_impl' has no attribute {name!r}")
    value = (
        importlib.import_module("keras_bert_impl.layers")
        if name == "layers"
        else getattr(importlib.import_module(_PUBLIC[name]), name)
    )
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))


# `import keras_bert_impl` registers every layer and model with Keras, so that
# `keras.saving.load_model` finds them: Keras does not import a module named in a .keras
# file by itself. That import is TensorFlow's and takes seconds. The `kbert` command
# defers it: `kbert --help` and a flag error answer at once, and `cli.main` imports the
# models before it runs a command.
if not os.path.basename(sys.argv[0] if sys.argv else "") == "kbert":
    from keras_bert_impl import layers  # noqa: E402,F401
    from keras_bert_impl.models import (  # noqa: E402,F401
        AttentionTerm,
        BERT_PRESETS,
        BertBackbone,
        BertClassifier,
        BertEmbedder,
        BertPretrainer,
        BertSpanLabeler,
        BertTask,
        BertTokenClassifier,
        DISTILLATION_DEFAULTS,
        DistillationArgumentError,
        DistillationDefaults,
        DistillationLoss,
        DistillationTerm,
        Distiller,
        EmbeddingTerm,
        GlobalBatchLoss,
        HiddenStatesTerm,
        LogitsTerm,
        MaskedLMAccuracy,
        MaskedSparseCrossentropy,
        QuantizationAwareClassifier,
    )

    # The optimizer and schedule of create_optimizer: a model trained with them saves them in
    # its .keras file, which otherwise failed to load ("Could not locate class 'GlobalClipAdamW'")
    # in a process that had not imported keras_bert_impl.training itself.
    from keras_bert_impl.training import (  # noqa: E402,F401
        AllReplicaLossScaleOptimizer,
        GlobalClipAdamW,
        WarmupPolynomialDecay,
    )

__version__ = "0.1.0"
