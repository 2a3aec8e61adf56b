"""`--precision`: what `kbert predict`, `kbert evaluate` and `kbert serve` run at (or `auto`: the
precision keras_bert_impl/precision_choice.py picks for this CPU), what the training commands
train at; one vocabulary (keras_bert_impl/precisions.py). `--runtime`: where an inference precision
runs (fp32 on TensorFlow by default, or on LiteRT's XNNPACK).

Imported while the parser is built, so it imports nothing heavy at module level (`kbert
--help` answers before TensorFlow loads).
"""

import argparse
import sys

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.precision_choice import AUTO, INT8_TASKS
from keras_bert_impl.precisions import PRECISIONS, RUNTIME_NAMES, TRAINING_PRECISIONS, check_precision, check_runtime

INFERENCE_CHOICES = PRECISIONS + (AUTO,)


def add_precision_flag(parser):
    parser.add_argument(
        "--precision", default="fp32", choices=INFERENCE_CHOICES, type=_precision_name,
        help="bf16: compute in bfloat16 (Keras' mixed_bfloat16; fast on CPUs with AVX512-BF16). int8: the "
        "classifier converted in memory to TFLite's dynamic-range int8 and run on XNNPACK (about 7 s to "
        "convert MiniLM-L6, once: the file is kept for the next run in $KBERT_CACHE_DIR, default "
        "~/.cache/keras_bert_impl; KBERT_CACHE_DIR=off converts every time; fast on CPUs with AVX512-VNNI; "
        "classification, pair and multilabel models). "
        "Labels nearly always fp32's: bench/results/inference_precision.json. auto: int8 for a classifier "
        "where the CPU has VNNI, else bf16 where it has BF16, else fp32 (what our benches measured faster "
        "on such CPUs); says its choice in one line. Default fp32.")
    parser.add_argument(
        "--runtime", default=None, choices=RUNTIME_NAMES,
        help="Where the precision runs. litert with fp32: the classifier converted in memory to a float32 TFLite "
        "graph on XNNPACK (about 7 s to convert MiniLM-L6, once, kept as int8's file is; faster than tensorflow on the AVX-512 CPUs we measured, "
        "about half the batch-1 latency; logits within 1e-4 of tensorflow's; classification, pair and multilabel "
        "models). Default: tensorflow for fp32 and bf16, litert for int8 (their only runtimes).")


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
        "--precision", default="fp32", choices=TRAINING_PRECISIONS,
        type=lambda value: _precision_name(value, TRAINING_PRECISIONS),
        help="bf16: Keras' mixed_bfloat16 (CPUs with AVX512-BF16, TPUs, recent GPUs); fp16: mixed_float16 with "
        "dynamic loss scaling (GPUs). Weights stay float32 either way, and model.keras computes in float32 (the "
        "precision it runs at is chosen when it runs). Default fp32.")
    parser.add_argument("--mixed-precision", action=_OldMixedPrecision, choices=("none", "bf16", "fp16"),
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS)


class _OldMixedPrecision(argparse.Action):
    """The training flag's spelling before one precision vocabulary (none meant fp32)."""

    def __call__(self, parser, namespace, value, option_string=None):
        new = "fp32" if value == "none" else value
        print(f"{parser.prog}: --mixed-precision {value} is now spelled --precision {new}; running with "
              f"--precision {new}.", file=sys.stderr)
        namespace.precision = new


def precision_for(requested, task, command, quantized=(), features=None):
    """The precision to run at: `requested`, or for "auto" the one `choose_precision` picks for
    this CPU and `task`. Says in one line on stderr what auto chose and why, or that an explicit
    bf16 or int8 is expected to be slower here (and runs it as asked). `quantized`: the modes of a
    model saved after Keras' model.quantize, which auto runs as saved; `features`: a
    `CpuFeatures`, default this machine's."""
    from keras_bert_impl.cpu_features import CpuFeatures
    from keras_bert_impl.precision_choice import choose_precision, slower_here

    if requested == "fp32" or (requested != AUTO and quantized):
        return requested  # a quantized model and an explicit precision: model_in_precision refuses
    features = features or CpuFeatures.of_this_machine()
    if requested == AUTO:
        if quantized:
            print(f"kbert {command}: --precision auto: the model as saved (quantized {', '.join(quantized)} with "
                  "Keras' model.quantize).", file=sys.stderr, flush=True)
            return "fp32"
        precision, reason = choose_precision(features, task)
        print(f"kbert {command}: --precision auto: {precision} on {features.describe()}, because {reason}.",
              file=sys.stderr, flush=True)
        return precision
    slower = slower_here(requested, features)
    if slower:
        print(f"kbert {command}: --precision {requested} is expected to be slower than fp32 here: {slower}; "
              f"running {requested} as asked.", file=sys.stderr, flush=True)
    return requested


def model_in_precision(model, precision, task):
    """The model to run. Classifiers go to `TextPredictor(..., precision=...)`, which makes
    their bf16 copy or int8 conversion itself, so they come back as they are; the token and
    span heads get their bf16 copy here, and int8 is refused for them (TextPredictor does
    not batch their outputs)."""
    from keras_bert_impl.models.quantized_layers import quantization_modes

    quantized = quantization_modes(model)
    if quantized and precision != "fp32":
        # A model saved after Keras' model.quantize already runs in its own precision.
        raise UsageError(
            f"--precision {precision} needs a float model; this one was quantized ({', '.join(quantized)}) with "
            "Keras' model.quantize. Leave --precision out to run it as saved, or pass the float model."
        )
    if task in INT8_TASKS or precision == "fp32":
        return model
    if precision == "int8":
        raise UsageError(
            f"--precision int8 runs classification, pair and multilabel models; this model's task is {task}. "
            "Use --precision fp32 or bf16."
        )
    from keras_bert_impl.inference import with_precision

    return with_precision(model, precision)


def runtime_for(runtime, requested, precision, task, quantized=()):
    """The runtime `precision` runs on for `--runtime runtime` (None: the precision's default).
    With `--precision auto` (`requested`) only the default: auto picks a precision, not where it
    runs. LiteRT runs the sequence-level heads of float models only (what `Int8Forward` converts;
    `quantized`: the modes of a model saved after Keras' model.quantize, which runs as saved)."""
    if runtime is None:
        return check_runtime(precision)
    if requested == AUTO:
        raise UsageError(f"--runtime {runtime} goes with an explicit --precision (auto picks the precision and runs it "
                         "on its own runtime): pass --precision fp32 --runtime litert, or leave --runtime out.")
    try:
        runtime = check_runtime(precision, runtime, name="--runtime", precision_name="--precision")
    except ValueError as e:
        raise UsageError(str(e)) from None
    if runtime == "litert" and quantized:
        raise UsageError(f"--runtime litert needs a float model; this one was quantized ({', '.join(quantized)}) with "
                         "Keras' model.quantize and runs as saved on tensorflow. Leave --runtime out, or pass the float "
                         "model.")
    if runtime == "litert" and task not in INT8_TASKS:
        raise UsageError(f"--runtime litert runs classification, pair and multilabel models; this model's task is {task}. "
                         "Leave --runtime out.")
    return runtime
