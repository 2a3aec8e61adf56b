"""`--precision`: what `kbert predict`, `kbert evaluate` and `kbert serve` run at (or `auto`: the
precision keras_bert_impl/precision_choice.py picks for this CPU), what the training commands
train at; one vocabulary (keras_bert_impl/precisions.py). `--runtime`: where an inference precision
runs (fp32 on TensorFlow by default, or on LiteRT's XNNPACK). The flags only: what a model runs at
a precision and runtime, or the refusal, is `inference.forward_resolver.ForwardResolver`'s.

Imported while the parser is built, so it imports nothing heavy at module level (`kbert
--help` answers before TensorFlow loads).
"""

import argparse
import sys

from keras_bert_impl.precision_choice import AUTO
from keras_bert_impl.precisions import PRECISIONS, RUNTIME_NAMES, TRAINING_PRECISIONS, check_precision

INFERENCE_CHOICES = PRECISIONS + (AUTO,)


def add_precision_flag(parser):
    parser.add_argument(
        "--precision",
        default="fp32",
        choices=INFERENCE_CHOICES,
        type=_precision_name,
        help="bf16: compute in bfloat16 (Keras' mixed_bfloat16; fast on CPUs with AVX512-BF16). int8: the "
        "classifier converted in memory to TFLite's dynamic-range int8 and run on XNNPACK (about 7 s to "
        "convert MiniLM-L6, once: the file is kept for the next run in $KBERT_CACHE_DIR, default "
        "~/.cache/keras_bert_impl; KBERT_CACHE_DIR=off converts every time; fast on CPUs with AVX512-VNNI; "
        "classification, pair and multilabel models). Labels nearly always fp32's: "
        "bench/results/inference_precision.json. auto: int8 for a classifier where the CPU has VNNI, else "
        "bf16 where it has BF16, else int8 for a classifier where it has AVX2, else fp32 (what our benches "
        "measured faster on such CPUs); says its choice "
        "in one line. A kbert finetune --qat model: fp32 runs its fake-quantized forward, int8 its "
        "integer-only file (what kbert export writes for it), auto one of the two; bf16 is refused. Default "
        "fp32.",
    )
    parser.add_argument(
        "--runtime",
        default=None,
        choices=RUNTIME_NAMES,
        help="Where the precision runs. litert with fp32: the classifier converted in memory to a float32 "
        "TFLite graph on XNNPACK (about 7 s to convert MiniLM-L6, once, kept as int8's file is; faster than "
        "tensorflow on the AVX-512 CPUs we measured, about half the batch-1 latency; logits within 1e-4 of "
        "tensorflow's; classification, pair and multilabel models). Default: tensorflow for fp32 and bf16, "
        "litert for int8 (their only runtimes).",
    )


def _precision_name(value, choices=INFERENCE_CHOICES):
    """The flag's value; another spelling of a precision (float32, mixed_bfloat16, ...) or an
    unknown one is argparse's error, exit 2, naming the word to use."""
    try:
        return check_precision(value, choices, name="--precision")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_training_precision_flag(parser):
    """`--precision fp32|bf16|fp16` of the training commands; their old `--mixed-precision
    none|bf16|fp16` still works, with a one-line note naming the new spelling."""
    parser.add_argument(
        "--precision",
        default="fp32",
        choices=TRAINING_PRECISIONS,
        type=lambda value: _precision_name(value, TRAINING_PRECISIONS),
        help="bf16: Keras' mixed_bfloat16 (CPUs with AVX512-BF16, TPUs, recent GPUs); fp16: mixed_float16 "
        "with dynamic loss scaling (GPUs). Weights stay float32 either way, and model.keras computes in "
        "float32 (the precision it runs at is chosen when it runs). Default fp32.",
    )
    parser.add_argument(
        "--mixed-precision",
        action=_OldMixedPrecision,
        choices=("none", "bf16", "fp16"),
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )


class _OldMixedPrecision(argparse.Action):
    """The training flag's spelling before one precision vocabulary (none meant fp32)."""

    def __call__(self, parser, namespace, value, option_string=None):
        new = "fp32" if value == "none" else value
        print(
            f"{parser.prog}: --mixed-precision {value} is now spelled --precision {new}; running with "
            f"--precision {new}.",
            file=sys.stderr,
        )
        namespace.precision = new
