"""`--precision auto`: the precision to run at, chosen from the CPU's features and the task, and
the warning for an explicit precision this CPU is expected to run slower than fp32.

A pure function of `CpuFeatures` (keras_bert_impl/cpu_features.py) and the task, so the table
below is tested on made-up CPUs and on this machine's. It holds only what our benches measured,
with accuracy kept (labels equal to fp32's on 99.6% of 1,000 MR sentences for int8, 99.9% for
bf16; MR test accuracy 0.8025 and 0.800 against fp32's 0.800: bench/results/inference_precision.json):

- AVX-512 with VNNI, without BF16 or AMX (an Intel Xeon, family 6 model 207, Emerald Rapids
  with avx512_bf16 and AMX hidden by its hypervisor; bench/results/cpu_peers.json, its run
  of this CPU kind, 2026-11-28 02:14, 5 paired interleaved rounds of warm processes over the
  4,000 MR sentences, nothing else on the 2 cores): int8 (`Int8Forward` in `LiteRtForms`) ran
  2.64x fp32 (`OneDnnForms`) per round (median; 2.42-2.81), accuracy on the 800 held-out
  sentences 0.7963 against 0.7950; bf16 ran 0.22x (0.21-0.23): oneDNN ran its bf16 matmuls as
  `gemm:jit:bf16` (its verbose lines, cpu_peers.json's isa.onednn_dispatch) with no AVX512-BF16
  dot products to run them on. So int8 for the classifiers and fp32 for the
  others. The whole `kbert predict --file` process over the same sentences, int8's
  conversion (load 8.9 s against fp32's 2.9 s) included (bench/results/precision_process.json,
  3 alternating rounds, idle), is what a one-off job pays: fp32 21.2 s (20.5-22.3), int8 19.4 s
  (18.8-19.7), 1.09x (1.07-1.15 per round); auto, which picked int8, 18.7 s.
- AVX-512 with VNNI and BF16 (an AMD EPYC Zen 4, family 25 model 17, with avx512_vnni and
  avx512_bf16, no AMX; bench/results/cpu_peers.json, its run of this CPU kind, 2026-11-28 04:52,
  5 paired interleaved rounds, idle): int8 ran 3.24x fp32 per round (median; 2.71-3.51), bf16
  1.44x (1.29-1.50), accuracy on the 800 held-out sentences 0.7975 for both against fp32's
  0.7950. As whole `kbert predict --file` processes (precision_process.json, 3 alternating
  rounds, 2026-11-28 12:03, idle, each converting afresh as a first run does): fp32 22.7 s, bf16
  21.2 s (1.15x), int8 17.3 s (1.31x); auto, which picked int8, 17.0 s; int8 reading its converted
  file from the cache (inference/litert_cache.py), as every later run does, 12.4 s (1.83x). So int8
  for the classifiers and bf16 for the others. Earlier runs on the same kind of
  CPU, before the forms: 3.03x and 1.47x (inference_throughput.json), 2.78x and 1.34x
  (inference_precision.json). XNNPACK's int8 products use the VNNI dot-product instructions,
  oneDNN's bf16 matmuls the AVX512-BF16 ones.
- AVX2 only (an AMD EPYC Zen 3: no AVX-512, VNNI or BF16; issue 33, `kbert predict --file` over
  the 4,000 MR sentences, whole process, two alternating rounds): fp32 39-41 s, int8 41 s (no
  gain), bf16 53 s (0.76x: slower). So fp32. bench/results/cpu_peers.json (2026-11-27, the
  same kind of CPU, warm processes, now with TensorFlow's oneDNN kernels on, which
  `import keras_bert_impl` turns on for x86) says why int8 gains little there: once converted
  it ran 0.90-1.18x fp32 per pass over the 4,000 sentences in its three rounds (before the
  oneDNN default, 1.44x), but converting took about 10 s more of the load (14.4 vs 4.6 s),
  which a one-off `kbert predict` of that size does not pay back. A long-running `kbert serve`
  would gain from int8 here; `auto` does not choose by the size of the job yet. A later run
  reads the converted file from the cache (inference/litert_cache.py) and skips those 10 s;
  whole processes with it have not been measured on this kind of CPU, so fp32 stays.

Where nothing was measured the choice follows the instruction a precision needs, and says so:
AVX-512 without VNNI or BF16 (e.g. Skylake-SP) has neither int8 dot products nor bf16
arithmetic, so fp32, as on AVX2; AVX-VNNI (the same dot products at 256 bits, on cores
without AVX-512) takes int8 as AVX512-VNNI does, since XNNPACK has int8 kernels for it;
AMX (which comes with AVX512-VNNI and BF16) takes what its VNNI and BF16 take, though oneDNN
may run bf16 on AMX's tiles faster than that (unmeasured here). int8 is for the classifier
tasks only (`TextPredictor` runs them; inference/forward_resolver.ForwardResolver refuses
int8 for the token and span heads), so the others get bf16 or fp32. Plain Python.
"""

from keras_bert_impl.cpu_features import CpuFeatures
from keras_bert_impl.precisions import check_precision

AUTO = "auto"
# The tasks int8 runs (TextPredictor's heads); the token and span heads run fp32 or bf16.
INT8_TASKS = ("classification", "pair", "multilabel")
# What each precision measured against fp32 with the extension it needs, and without it (on the
# AVX2-only CPU, whole `kbert predict` processes); the sources are in the docstring above.
INT8_GAIN, BF16_GAIN = "int8 ran 3.24x fp32 on an AVX512-VNNI CPU", "bf16 ran 1.44x fp32 on an AVX512-BF16 CPU"
INT8_NO_GAIN, BF16_LOSS, ON_AVX2 = "int8 took 41 s to fp32's 39-41 s", "bf16 ran 0.76x fp32", " on an AVX2-only CPU"
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
    >>> choose_precision(CpuFeatures("AMD EPYC", ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]), "tagging")
    ('bf16', 'it has BF16 (bf16 ran 1.44x fp32 on an AVX512-BF16 CPU; int8 is for classifiers, this model is tagging)')
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
