"""The one precision vocabulary: fp32, bf16, fp16, int8.

What a model runs at (`kbert predict --precision`, `kbert evaluate --precision`,
`TextPredictor(precision=...)`, `with_precision`): PRECISIONS. What it trains at (`--precision`
of `kbert finetune`, `distill` and `pretrain`): TRAINING_PRECISIONS, Keras' dtype policy for each
in DTYPE_POLICIES. These names and no others. Where an inference precision runs (`--runtime`,
`TextPredictor(runtime=...)`): RUNTIMES. Plain Python, so `kbert --help` reads the lists without
TensorFlow.
"""

PRECISIONS = ("fp32", "bf16", "int8")
TRAINING_PRECISIONS = ("fp32", "bf16", "fp16")
# Weights stay float32 under both mixed policies; fp16 also needs a loss-scale optimizer.
DTYPE_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
# The runtimes each inference precision runs on, its default first: TensorFlow's kernels (oneDNN
# on x86) or LiteRT's XNNPACK (the classifier converted in memory, inference/litert_forward.py).
# fp32 on LiteRT is opt-in: faster on the AVX-512 CPUs measured (cpu_peers.json: 1.03x and 1.18x
# our TensorFlow fp32 at batch 32, about half its batch-1 latency), but it converts the model on
# load (about 8 s for MiniLM-L6) and its logits are XNNPACK's (within 1e-4 of TensorFlow's).
# bf16 has no XNNPACK path here; int8 has no fast TensorFlow one (inference/precision.py).
RUNTIMES = {"fp32": ("tensorflow", "litert"), "bf16": ("tensorflow",), "int8": ("litert",)}
# The quantization (kbert export's and LiteRtForward's word for a .tflite's numbers) each precision
# runs at on LiteRT: int8 is TFLite's dynamic-range int8, spelled dynamic_int8 where files are named.
LITERT_QUANTIZATION = {"int8": "dynamic_int8", "fp32": "float32"}
RUNTIME_NAMES = tuple(dict.fromkeys(runtime for runs in RUNTIMES.values() for runtime in runs))  # each once

# Spellings of the same precisions met elsewhere (Keras' dtype policies, TFLite's quantization
# names, the training flag's `none`): refused, naming the word used here.
OTHER_SPELLINGS = {
    "float32": "fp32",
    "none": "fp32",
    "mixed_bfloat16": "bf16",
    "bfloat16": "bf16",
    "mixed_float16": "fp16",
    "float16": "fp16",
    LITERT_QUANTIZATION["int8"]: "int8",
}


def check_precision(value, choices=PRECISIONS, name="precision"):
    """`value` if it is one of `choices` (a subset of PRECISIONS; the inference flag adds
    `auto`); an old spelling is refused with its name here, anything else with the list."""
    if value in choices:
        return value
    if OTHER_SPELLINGS.get(value) in choices:
        raise ValueError(
            f"{name} {value!r} is spelled {OTHER_SPELLINGS[value]!r} here (one name per precision: "
            f"{', '.join(choices)})."
        )
    raise ValueError(f"{name} must be one of {list(choices)}. Received: {name}={value!r}")


def check_runtime(precision, runtime=None, name="runtime", precision_name="precision"):
    """The runtime `precision` (one of PRECISIONS) runs on: `runtime`, or the precision's default
    for None; a runtime the precision has no path on is refused, naming what runs it (`name` and
    `precision_name`: the argument names the message uses)."""
    if runtime is None:
        return RUNTIMES[precision][0]
    if runtime not in RUNTIME_NAMES:
        raise ValueError(f"{name} must be one of {list(RUNTIME_NAMES)}. Received: {name}={runtime!r}")
    if runtime not in RUNTIMES[precision]:
        others = " or ".join(p for p, runs in RUNTIMES.items() if runtime in runs)
        raise ValueError(
            f"{name} {runtime} runs {precision_name} {others}; {precision} runs on "
            f"{' or '.join(RUNTIMES[precision])} only. Received: {name}={runtime!r} with "
            f"{precision_name}={precision!r}: leave {name} out, or pick {precision_name} {others}."
        )
    return runtime
