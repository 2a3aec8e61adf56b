"""`--precision auto`: the precision to run at, chosen from the CPU's features and the task, and
the warning for an explicit precision this CPU is expected to run slower than fp32.

A pure function of `CpuFeatures` (keras_bert_impl/cpu_features.py) and the task, so the choice
is tested on made-up CPUs and on this machine's. By what the CPU has:

- VNNI (AVX-512's, or AVX-VNNI's at 256 bits): int8 for the classifier tasks, whose int8 runs
  on XNNPACK's VNNI dot products; the other heads as below.
- BF16: bf16 (oneDNN runs its matmuls on the AVX512-BF16 instructions).
- neither (AVX2 only, or AVX-512 without VNNI or BF16): fp32. bf16 runs slower than fp32
  there, and int8 gains too little to pay for its conversion in one `kbert predict`.
- AMX comes with VNNI and BF16 and takes what they take.

int8 is for the classifier tasks only (`TextPredictor` runs them; inference/forward_resolver
refuses int8 for the token and span heads). Each reason quotes what was measured on a CPU kind
the project ran on, with accuracy kept; the figures live in the results files:
bench/results/cpu_peers.json (per pass, one run per CPU kind), precision_process.json (whole
`kbert predict --file` processes) and inference_precision.json (labels against fp32's), shown
per CPU kind in docs/benchmarks.md; the AVX2-only CPU's whole-process times are issue 33's.
Where nothing was measured (AVX-512 without VNNI or BF16, AVX-VNNI, AMX) the choice follows the
instruction a precision needs. Plain Python.
"""

from keras_bert_impl.cpu_features import CpuFeatures
from keras_bert_impl.precisions import check_precision
from keras_bert_impl.tasks import SEQUENCE_TASKS

AUTO = "auto"
# The tasks int8 runs (TextPredictor's heads); the token and span heads run fp32 or bf16.
INT8_TASKS = SEQUENCE_TASKS
# What each precision measured against fp32 with the extension it needs, and without it (on the
# AVX2-only CPU, whole `kbert predict` processes): bench/results/cpu_peers.json and
# precision_process.json; the AVX2-only processes are issue 33's.
INT8_GAIN, BF16_GAIN = (
    "int8 ran 3.24x fp32 on an AVX512-VNNI CPU",
    "bf16 ran 1.44x fp32 on an AVX512-BF16 CPU",
)
INT8_NO_GAIN, BF16_LOSS, ON_AVX2 = (
    "int8 took 41 s to fp32's 39-41 s",
    "bf16 ran 0.76x fp32",
    " on an AVX2-only CPU",
)
# The AVX-512 VNNI CPU without BF16 (the Xeon above): int8 per pass and as a whole process, and
# bf16 per pass, each against fp32 in the same rounds.
INT8_GAIN_NO_BF16 = "int8 ran 2.64x fp32 on an AVX512-VNNI CPU without BF16"
BF16_LOSS_AVX512 = "bf16 ran 0.22x fp32 on an AVX512-VNNI CPU without BF16"
NEEDS = {"int8": "VNNI", "bf16": "BF16"}


def _int8_gain(features):
    """What int8 measured on the CPU kind nearest `features` (one with VNNI): the AVX-512 VNNI
    CPU without BF16 where that is what it is, else the VNNI/BF16 one."""
    return INT8_GAIN_NO_BF16 if features.has("AVX-512") and not features.has("BF16") else INT8_GAIN


def _bf16_loss(features):
    """What bf16 measured on the CPU kind nearest `features` (one without BF16): the AVX-512
    VNNI CPU where it has AVX-512, else the AVX2-only one."""
    return BF16_LOSS_AVX512 if features.has("AVX-512") else BF16_LOSS + ON_AVX2


def choose_precision(features, task):
    """(precision, reason) for `--precision auto`: "int8", "bf16" or "fp32", and the clause
    that says which CPU features decided it and what was measured.

    Args:
        features: a `CpuFeatures`.
        task: the model's task: classification, pair, multilabel, tagging or squad.

    Example:
    >>> choose_precision(CpuFeatures("AMD EPYC", ["avx2", "fma"]), "classification")[0]
    'fp32'
    >>> choose_precision(CpuFeatures("AMD EPYC", ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]),
    ...                  "tagging")
    ('bf16', 'it has BF16 (bf16 ran 1.44x fp32 on an AVX512-BF16 CPU; int8 is for classifiers, this model is
    tagging)')
    """
    if not isinstance(features, CpuFeatures):
        raise TypeError(f"features must be a CpuFeatures. Received: features={features!r}")
    classifier = task in INT8_TASKS
    if classifier and features.has("VNNI"):
        return "int8", f"it has VNNI ({_int8_gain(features)})"
    not_int8 = "" if classifier else f"; int8 is for classifiers, this model is {task}"
    if features.has("BF16"):
        return "bf16", f"it has BF16{' but no VNNI' if classifier else ''} ({BF16_GAIN}{not_int8})"
    if classifier:
        # No VNNI (so no AVX-512 VNNI CPU): both measurements are the AVX2-only CPU's.
        return "fp32", f"it has no VNNI or BF16 ({INT8_NO_GAIN} and {BF16_LOSS}{ON_AVX2})"
    return "fp32", f"it has no BF16 ({_bf16_loss(features)}{not_int8})"


def slower_here(precision, features):
    """None where `precision` is expected to run at least as fast as fp32 on this CPU; else a
    clause naming the missing extension and what was measured without it.

    Example:
    >>> slower_here("bf16", CpuFeatures("AMD EPYC", ["avx2", "fma"]))
    'this CPU has no BF16 (bf16 ran 0.76x fp32 on an AVX2-only CPU)'
    """
    check_precision(precision)
    if precision not in NEEDS or features.has(NEEDS[precision]):
        return None
    # int8 without VNNI was measured on the AVX2-only CPU only; bf16 without BF16 on both kinds.
    measured = INT8_NO_GAIN + ON_AVX2 if precision == "int8" else _bf16_loss(features)
    return f"this CPU has no {NEEDS[precision]} ({measured})"
