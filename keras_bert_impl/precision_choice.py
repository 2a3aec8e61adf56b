"""`--precision auto`: the precision to run at, chosen from the CPU's features and the task, and
the warning for an explicit precision this CPU is expected to run slower than fp32.

A pure function of `CpuFeatures` (keras_bert_impl/cpu_features.py) and the task, so the choice
is tested on made-up CPUs and on this machine's. By what the CPU has:

- VNNI (AVX-512's, or AVX-VNNI's at 256 bits): int8 for the classifier tasks, whose int8 runs
  on XNNPACK's VNNI dot products; the other heads as below.
- BF16: bf16 (oneDNN runs its matmuls on the AVX512-BF16 instructions).
- AVX2 without VNNI or BF16 (the AVX2-only CPUs, AVX-512 without either): int8 for the classifier
  tasks, on XNNPACK's AVX2 int8 kernels: faster than fp32 per pass, per request and as a whole
  process once the converted file is cached (a model's first process, which converts it, about
  even); fp32 for the other heads (bf16 runs slower than fp32 there).
- none of them (a CPU whose features are unknown): fp32.
- AMX comes with VNNI and BF16 and takes what they take.

int8 is for the classifier tasks only (`TextPredictor` runs them; inference/forward_resolver
refuses int8 for the token and span heads). Each reason quotes what was measured on a CPU kind
the project ran on, with accuracy kept; the figures live in the results files:
bench/results/cpu_peers.json (per pass, one run per CPU kind), precision_process.json (whole
`kbert predict --file` processes) and inference_precision.json (labels against fp32's), shown
per CPU kind in docs/benchmarks.md. Where nothing was measured (AVX-512 without VNNI or BF16,
AVX-VNNI, AMX) the choice follows the instruction a precision needs. Plain Python.
"""

from keras_bert_impl.cpu_features import CpuFeatures
from keras_bert_impl.precisions import check_precision
from keras_bert_impl.tasks import SEQUENCE_TASKS

AUTO = "auto"
# The tasks int8 runs (TextPredictor's heads); the token and span heads run fp32 or bf16.
INT8_TASKS = SEQUENCE_TASKS
# What each precision measured against fp32 with the extension it needs, and without it:
# bench/results/cpu_peers.json (per pass) and precision_process.json (whole `kbert predict
# --file` processes: int8 converting the model, and reading it from the cache).
INT8_GAIN, BF16_GAIN = (
    "int8 ran 3.24x fp32 on an AVX512-VNNI CPU",
    "bf16 ran 1.44x fp32 on an AVX512-BF16 CPU",
)
INT8_GAIN_AVX2 = (
    "int8 ran 1.42x fp32 per pass, and 1.38x as a whole process once its converted file is cached "
    "(0.97x the first time, converting it), on an AVX2-only CPU"
)
BF16_LOSS, ON_AVX2 = "bf16 ran 0.70x fp32", " on an AVX2-only CPU"
# The AVX-512 VNNI CPU without BF16 (the Xeon above): int8 per pass and as a whole process, and
# bf16 per pass, each against fp32 in the same rounds.
INT8_GAIN_NO_BF16 = "int8 ran 2.64x fp32 on an AVX512-VNNI CPU without BF16"
BF16_LOSS_AVX512 = "bf16 ran 0.22x fp32 on an AVX512-VNNI CPU without BF16"
# Why a classifier stays fp32 on a CPU without AVX2 or VNNI (a quantization-aware one: no integer file).
NO_INT8_GAIN = "it has no AVX2 or VNNI (int8 was measured faster than fp32 only on CPUs with one of them)"


def int8_reason(features):
    """The clause saying why int8 runs a classifier faster than fp32 on a CPU with `features` (its
    VNNI, else its AVX2, and what int8 measured with it); None where neither was measured."""
    if features.has("VNNI"):
        gain = INT8_GAIN_NO_BF16 if features.has("AVX-512") and not features.has("BF16") else INT8_GAIN
        return f"it has VNNI ({gain})"
    if features.has("AVX2"):
        return f"it has AVX2 ({INT8_GAIN_AVX2})"
    return None


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
    'int8'
    >>> choose_precision(CpuFeatures("AMD EPYC", ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]),
    ...                  "tagging")
    ('bf16', 'it has BF16 (bf16 ran 1.44x fp32 on an AVX512-BF16 CPU; int8 is for classifiers, this model is
    tagging)')
    """
    if not isinstance(features, CpuFeatures):
        raise TypeError(f"features must be a CpuFeatures. Received: features={features!r}")
    classifier = task in INT8_TASKS
    int8 = int8_reason(features) if classifier else None
    # A CPU with BF16 but no VNNI (none measured) runs bf16's matmuls natively: bf16.
    if int8 and (features.has("VNNI") or not features.has("BF16")):
        return "int8", int8
    not_int8 = "" if classifier else f"; int8 is for classifiers, this model is {task}"
    if features.has("BF16"):
        return "bf16", f"it has BF16{' but no VNNI' if classifier else ''} ({BF16_GAIN}{not_int8})"
    if classifier:
        return "fp32", NO_INT8_GAIN
    return "fp32", f"it has no BF16 ({_bf16_loss(features)}{not_int8})"


def slower_here(precision, features):
    """None where `precision` is expected to run at least as fast as fp32 on this CPU; else a
    clause naming the missing extension and what was measured without it.

    Example:
    >>> slower_here("bf16", CpuFeatures("AMD EPYC", ["avx2", "fma"]))
    'this CPU has no BF16 (bf16 ran 0.70x fp32 on an AVX2-only CPU)'
    """
    check_precision(precision)
    # int8 ran faster than fp32 on every CPU kind measured, the AVX2-only one included.
    if precision != "bf16" or features.has("BF16"):
        return None
    return f"this CPU has no BF16 ({_bf16_loss(features)})"
