"""The one precision vocabulary: fp32, bf16, fp16, int8.

What a model runs at (`kbert predict --precision`, `kbert evaluate --precision`,
`TextPredictor(precision=...)`, `with_precision`): PRECISIONS. What it trains at (`--precision`
of `kbert finetune`, `distill` and `pretrain`): TRAINING_PRECISIONS, Keras' dtype policy for each
in DTYPE_POLICIES. These names and no others. Plain Python, so `kbert --help` reads the lists
without TensorFlow.
"""

PRECISIONS = ("fp32", "bf16", "int8")
TRAINING_PRECISIONS = ("fp32", "bf16", "fp16")
# Weights stay float32 under both mixed policies; fp16 also needs a loss-scale optimizer.
DTYPE_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
# Spellings of the same precisions met elsewhere (Keras' dtype policies, TFLite's quantization
# names, the training flag's `none`): refused, naming the word used here.
OTHER_SPELLINGS = {
    "float32": "fp32", "none": "fp32", "mixed_bfloat16": "bf16", "bfloat16": "bf16", "mixed_float16": "fp16",
    "float16": "fp16", "dynamic_int8": "int8",
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
