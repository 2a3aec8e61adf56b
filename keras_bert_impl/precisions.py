"""The one precision vocabulary: fp32, bf16, int8.

`kbert predict --precision`, `kbert evaluate --precision`, `TextPredictor(precision=...)` and
`with_precision` take these names and no others. Plain Python, so `kbert --help` reads the
list without TensorFlow.
"""

PRECISIONS = ("fp32", "bf16", "int8")
# Spellings of the same precisions met elsewhere (Keras' dtype policies, TFLite's quantization
# names, the training flag's `none`): refused, naming the word used here.
OTHER_SPELLINGS = {
    "float32": "fp32", "none": "fp32", "mixed_bfloat16": "bf16", "bfloat16": "bf16", "dynamic_int8": "int8",
}


def check_precision(value, choices=PRECISIONS, name="precision"):
    """`value` if it is one of `choices` (a subset of PRECISIONS); an old spelling is refused
    with its name here, anything else with the list."""
    if value in choices:
        return value
    if OTHER_SPELLINGS.get(value) in choices:
        raise ValueError(
            f"{name} {value!r} is spelled {OTHER_SPELLINGS[value]!r} here (one name per precision: "
            f"{', '.join(choices)})."
        )
    raise ValueError(f"{name} must be one of {list(choices)}. Received: {name}={value!r}")
