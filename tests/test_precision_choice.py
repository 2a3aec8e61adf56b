"""`--precision auto`'s choice (keras_bert_impl/precision_choice.py) on tables of CPU features,
on the CPU our int8 and bf16 figures were measured on (its flags as the results file records
them), and on this machine: it never picks a precision expected to be slower than fp32 here."""

import json
import os
import re

import pytest

from keras_bert_impl.cpu_features import CpuFeatures
from keras_bert_impl.precision_choice import INT8_GAIN_AVX2, choose_precision, slower_here

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSIFIER_TASKS = ("classification", "pair", "multilabel")
OTHER_TASKS = ("tagging", "squad")

AVX2 = ["sse4_2", "avx", "avx2", "fma"]  # Zen 3, Haswell to Comet Lake
AVX512 = AVX2 + ["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"]  # Skylake-SP
# The Intel Xeon of cpu_peers' AVX-512 run (family 6 model 207, Emerald Rapids under a hypervisor
# that hides avx512_bf16 and AMX): its AVX, FMA and AMX flags as the results file records them.
XEON_VNNI_NO_BF16 = [
    "avx",
    "avx2",
    "avx512_bitalg",
    "avx512_vbmi2",
    "avx512_vnni",
    "avx512_vpopcntdq",
    "avx512bw",
    "avx512cd",
    "avx512dq",
    "avx512f",
    "avx512ifma",
    "avx512vbmi",
    "avx512vl",
    "fma",
]
# CPU -> (flags, auto for a classifier, auto for a token or span head)
TABLE = {
    "AVX2 only": (AVX2, "int8", "fp32"),
    "AVX-512 without VNNI": (AVX512, "int8", "fp32"),
    "AVX-512 + VNNI": (AVX512 + ["avx512_vnni"], "int8", "fp32"),  # Cascade Lake
    "AVX-512 + VNNI, BF16 and AMX hidden (measured)": (XEON_VNNI_NO_BF16, "int8", "fp32"),
    "AVX-512 + VNNI + BF16": (AVX512 + ["avx512_vnni", "avx512_bf16"], "int8", "bf16"),  # Cooper Lake, Zen 4
    "AMX": (
        AVX512 + ["avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"],
        "int8",
        "bf16",
    ),  # Sapphire Rapids
    "AVX-VNNI, no AVX-512": (AVX2 + ["avx_vnni"], "int8", "fp32"),  # Alder Lake
    "BF16 without VNNI": (AVX512 + ["avx512_bf16"], "bf16", "bf16"),
    "unknown (no /proc/cpuinfo)": ([], "fp32", "fp32"),
}


@pytest.mark.parametrize("cpu", sorted(TABLE))
def test_the_choice_on_each_kind_of_cpu(cpu):
    flags, classifier, other = TABLE[cpu]
    features = CpuFeatures(None if not flags else "a CPU", flags)
    for task in CLASSIFIER_TASKS + OTHER_TASKS:
        precision, reason = choose_precision(features, task)
        assert precision == (classifier if task in CLASSIFIER_TASKS else other), (cpu, task, reason)
        # The reason names the features that decided it, and auto never picks what it would warn about.
        assert reason.startswith("it has "), reason
        assert slower_here(precision, features) is None, (cpu, task)


def test_the_reasons_name_the_deciding_features_and_the_measurements():
    avx2 = CpuFeatures("AMD EPYC", AVX2)
    assert choose_precision(avx2, "classification") == ("int8", f"it has AVX2 ({INT8_GAIN_AVX2})")
    assert choose_precision(avx2, "squad") == (
        "fp32",
        "it has no BF16 (bf16 ran 0.70x fp32 on an AVX2-only CPU; int8 is for classifiers, this model is "
        "squad)",
    )
    vnni_bf16 = CpuFeatures("x", AVX512 + ["avx512_vnni", "avx512_bf16"])
    assert choose_precision(vnni_bf16, "pair") == (
        "int8",
        "it has VNNI (int8 ran 3.24x fp32 on an AVX512-VNNI CPU)",
    )
    # AVX-512 VNNI without BF16: this kind's own measurements (cpu_peers.json's Xeon run).
    xeon = CpuFeatures("Intel(R) Xeon(R) Processor", XEON_VNNI_NO_BF16)
    assert choose_precision(xeon, "classification") == (
        "int8",
        "it has VNNI (int8 ran 2.64x fp32 on an AVX512-VNNI CPU without BF16)",
    )
    assert choose_precision(xeon, "tagging") == (
        "fp32",
        "it has no BF16 (bf16 ran 0.22x fp32 on an AVX512-VNNI CPU without BF16; int8 is for classifiers, "
        "this model is tagging)",
    )
    # AVX-VNNI without AVX-512 (nothing measured): the VNNI/BF16 CPU's int8 figure.
    assert choose_precision(CpuFeatures("x", AVX2 + ["avx_vnni"]), "classification")[1] == (
        "it has VNNI (int8 ran 3.24x fp32 on an AVX512-VNNI CPU)"
    )
    bf16 = CpuFeatures("x", AVX512 + ["avx512_bf16"])
    assert choose_precision(bf16, "multilabel") == (
        "bf16",
        "it has BF16 but no VNNI (bf16 ran 1.44x fp32 on an AVX512-BF16 CPU)",
    )
    with pytest.raises(TypeError, match=r"features must be a CpuFeatures. Received: features=\['avx2'\]"):
        choose_precision(["avx2"], "classification")


def test_the_measured_cpu_gets_int8_and_bf16():
    """The CPUs of the VNNI/BF16 figures (int8 3.24x and bf16 1.44x in cpu_peers.json's Zen 4
    run; 3.03x and 1.47x before the forms), from the flags the results files record."""
    with open(os.path.join(REPO, "bench", "results", "cpu_peers.json"), encoding="utf-8") as f:
        zen4 = json.load(f)["runs"]["AMD EPYC (AVX2, AVX-512, VNNI, BF16; no AMX)"]["machine"]
    machines = [("cpu_peers.json", zen4)]
    for name in ("inference_throughput.json", "inference_precision.json"):
        with open(os.path.join(REPO, "bench", "results", name), encoding="utf-8") as f:
            machines.append((name, json.load(f)["machine"]))
    for name, machine in machines:
        features = CpuFeatures(machine["cpu_model"], machine["cpu_simd"])
        assert features.extensions == ["AVX2", "AVX-512", "VNNI", "BF16"], name
        assert choose_precision(features, "classification")[0] == "int8"
        assert choose_precision(features, "tagging")[0] == "bf16"


def test_explicit_precisions_expected_slower_name_the_missing_feature():
    avx2 = CpuFeatures("AMD EPYC", AVX2)
    assert slower_here("bf16", avx2) == "this CPU has no BF16 (bf16 ran 0.70x fp32 on an AVX2-only CPU)"
    # int8 ran faster than fp32 on every CPU kind measured, the AVX2-only one included.
    assert slower_here("int8", avx2) is None and slower_here("int8", CpuFeatures(None, [])) is None
    assert slower_here("fp32", avx2) is None
    # VNNI without BF16: int8 is expected fast, bf16 not; either BF16 (AVX-512's or AMX's) counts.
    cascade = CpuFeatures("x", AVX512 + ["avx512_vnni"])
    assert slower_here("int8", cascade) is None
    assert slower_here("bf16", cascade) == (
        "this CPU has no BF16 (bf16 ran 0.22x fp32 on an AVX512-VNNI CPU without BF16)"
    )
    assert slower_here("bf16", CpuFeatures("x", AVX512 + ["amx_bf16"])) is None
    assert slower_here("int8", CpuFeatures("x", AVX2 + ["avx_vnni"])) is None
    with pytest.raises(
        ValueError, match=r"precision must be one of \['fp32', 'bf16', 'int8'\]. Received: precision='auto'"
    ):
        slower_here("auto", avx2)


def test_on_this_machine_auto_never_picks_a_precision_expected_slower_here():
    """This machine's real /proc/cpuinfo: on the AVX2-only AMD EPYC (int8 1.42x, bf16 0.70x) and
    on the AVX-512 VNNI Xeon without BF16 (int8 2.64x, bf16 0.22x) that is int8 for the
    classifiers and fp32 for the others; on the Zen 4 EPYC with VNNI and BF16 (int8
    3.24x, bf16 1.44x) int8 for the classifiers and bf16 for the others."""
    features = CpuFeatures.of_this_machine()
    for task in CLASSIFIER_TASKS + OTHER_TASKS:
        precision, _ = choose_precision(features, task)
        assert slower_here(precision, features) is None, (features.describe(), task, precision)
        if not features.has("VNNI") and not features.has("BF16"):
            int8 = task in CLASSIFIER_TASKS and features.has("AVX2")
            assert precision == ("int8" if int8 else "fp32"), (features.describe(), task)
        if features.has("VNNI") and not features.has("BF16"):
            assert precision == ("int8" if task in CLASSIFIER_TASKS else "fp32"), (features.describe(), task)
        if features.has("VNNI") and features.has("BF16"):
            assert precision == ("int8" if task in CLASSIFIER_TASKS else "bf16"), (features.describe(), task)


def _median_ratio(run, precision):
    """cpu_peers: our `precision` over our fp32, per round, median (the ratio the run records, or
    from its per-round speeds where the run predates it)."""
    ratio = run.get("ratios", {}).get(f"ours_{precision}_over_ours_fp32")
    if ratio:
        return ratio["median"]
    speeds = run["runtimes"]
    per_round = [
        a / b
        for a, b in zip(
            speeds[f"ours_{precision}"]["sentences_per_second"], speeds["ours_fp32"]["sentences_per_second"]
        )
    ]
    return sorted(per_round)[len(per_round) // 2]


def test_on_every_measured_cpu_auto_picks_nothing_that_measured_slower_there():
    """Each CPU kind of cpu_peers.json (warm passes) and precision_process.json (whole `kbert
    predict` processes: int8's reading its converted file from the cache where the run measured
    that, as every process after a model's first does (inference/litert_cache.py), else converting):
    what auto picks there ran at least as fast as fp32 in that run, and each precision that ran
    slower is one an explicit flag warns about there."""
    with open(os.path.join(REPO, "bench", "results", "cpu_peers.json"), encoding="utf-8") as f:
        peers = json.load(f)["runs"]
    with open(os.path.join(REPO, "bench", "results", "precision_process.json"), encoding="utf-8") as f:
        processes = json.load(f)["runs"]
    assert set(processes) <= set(peers)
    for kind, run in peers.items():
        features = CpuFeatures(run["machine"]["cpu_model"], run["machine"]["cpu_simd"])
        assert features.describe() == kind
        chosen = {choose_precision(features, task)[0] for task in CLASSIFIER_TASKS + OTHER_TASKS}
        for precision in ("int8", "bf16"):
            faster = _median_ratio(run, precision) >= 1
            measured = processes.get(kind, {}).get("processes", {})
            whole = f"{precision}_cached" if f"{precision}_cached" in measured else precision
            if whole in measured:
                faster = (
                    faster and processes[kind]["speed_over_fp32"][f"fp32_seconds_over_{whole}"]["median"] >= 1
                )
            assert (precision in chosen) <= faster, (kind, precision)
            if not faster:
                assert slower_here(precision, features), (kind, precision)


AVX2_KIND = "AMD EPYC (AVX2; no AVX-512, VNNI, BF16 or AMX)"
XEON_KIND = "Intel(R) Xeon(R) Processor (AVX2, AVX-512, VNNI; no BF16 or AMX)"
ZEN4_KIND = "AMD EPYC (AVX2, AVX-512, VNNI, BF16; no AMX)"


def test_the_figures_the_reasons_quote_are_the_results_files():
    """Each ratio a reason quotes is its CPU kind's median in cpu_peers.json (per pass, our
    precision over our fp32) or precision_process.json (whole processes, fp32's seconds over the
    precision's), rounded as quoted: a re-run that moves a figure fails here until the text follows."""
    from keras_bert_impl import precision_choice as choice

    with open(os.path.join(REPO, "bench", "results", "cpu_peers.json"), encoding="utf-8") as f:
        peers = json.load(f)["runs"]
    with open(os.path.join(REPO, "bench", "results", "precision_process.json"), encoding="utf-8") as f:
        processes = json.load(f)["runs"]

    def per_pass(kind, precision):
        return peers[kind]["ratios"][f"ours_{precision}_over_ours_fp32"]["median"]

    def whole(kind, precision):
        return processes[kind]["speed_over_fp32"][f"fp32_seconds_over_{precision}"]["median"]

    quoted = {
        choice.INT8_GAIN: [per_pass(ZEN4_KIND, "int8")],
        choice.BF16_GAIN: [per_pass(ZEN4_KIND, "bf16")],
        choice.INT8_GAIN_NO_BF16: [per_pass(XEON_KIND, "int8")],
        choice.BF16_LOSS_AVX512: [per_pass(XEON_KIND, "bf16")],
        choice.BF16_LOSS: [per_pass(AVX2_KIND, "bf16")],
        choice.INT8_GAIN_AVX2: [
            per_pass(AVX2_KIND, "int8"),
            whole(AVX2_KIND, "int8_cached"),
            whole(AVX2_KIND, "int8"),
        ],
    }
    for text, figures in quoted.items():
        assert re.findall(r"(\d+\.\d+)x", text) == [f"{figure:.2f}" for figure in figures], text
