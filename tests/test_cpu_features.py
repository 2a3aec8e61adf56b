"""CpuFeatures: the extensions that decide int8 and bf16 speed, from a table of real CPUs'
flags (Linux's /proc/cpuinfo names), and this machine's against util-linux's `lscpu`."""

import json
import shutil
import subprocess

import pytest

from keras_bert_impl.cpu_features import CpuFeatures
from keras_bert_impl_export.report import report_markdown
from tests.export.test_stated_figures import _read

# /proc/cpuinfo flags of each kind of CPU, cut to the ones that matter here and a few others.
ZEN3 = "fpu sse4_2 avx f16c fma avx2 bmi2 sha_ni vaes vpclmulqdq".split()  # this project's EPYC
ICE_LAKE_SERVER = "avx2 fma avx512f avx512dq avx512bw avx512vl avx512_vnni avx512_vbmi2".split()
COOPER_LAKE = ICE_LAKE_SERVER + ["avx512_bf16"]
SAPPHIRE_RAPIDS = COOPER_LAKE + "amx_bf16 amx_tile amx_int8 avx_vnni".split()
ALDER_LAKE = "avx2 fma avx_vnni".split()  # VNNI at 256 bits, no AVX-512
SKYLAKE_SERVER = "avx2 fma avx512f avx512dq avx512bw avx512vl".split()  # AVX-512 without VNNI


@pytest.mark.parametrize(
    "flags, extensions, described",
    [
        (ZEN3, ["AVX2"], "(AVX2; no AVX-512, VNNI, BF16 or AMX)"),
        (SKYLAKE_SERVER, ["AVX2", "AVX-512"], "(AVX2, AVX-512; no VNNI, BF16 or AMX)"),
        (ICE_LAKE_SERVER, ["AVX2", "AVX-512", "VNNI"], "(AVX2, AVX-512, VNNI; no BF16 or AMX)"),
        (COOPER_LAKE, ["AVX2", "AVX-512", "VNNI", "BF16"], "(AVX2, AVX-512, VNNI, BF16; no AMX)"),
        (SAPPHIRE_RAPIDS, ["AVX2", "AVX-512", "VNNI", "BF16", "AMX"], "(AVX2, AVX-512, VNNI, BF16, AMX)"),
        (ALDER_LAKE, ["AVX2", "VNNI"], "(AVX2, VNNI; no AVX-512, BF16 or AMX)"),
        (["fp", "asimd", "asimddp", "bf16"], [], "(no AVX2, AVX-512, VNNI, BF16 or AMX)"),  # an ARM core
    ],
    ids=["zen3", "skylake", "ice_lake", "cooper_lake", "sapphire_rapids", "alder_lake", "arm"],
)
def test_extensions_of_each_kind_of_cpu(flags, extensions, described):
    cpu = CpuFeatures("Some CPU", flags)
    assert cpu.extensions == extensions
    assert cpu.describe() == f"Some CPU {described}"
    assert CpuFeatures.from_dict(cpu.to_dict()).to_dict() == cpu.to_dict()


def test_cpuinfo_is_read_for_x86_and_arm_and_missing_is_said(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu avx2 fma\n\n"
        "processor\t: 1\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu avx2 fma\n"
    )
    assert (
        CpuFeatures.of_this_machine(str(x86)).describe()
        == "AMD EPYC 7B13 (AVX2; no AVX-512, VNNI, BF16 or AMX)"
    )
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes\n")
    assert CpuFeatures.of_this_machine(str(arm)).flags == {"fp", "asimd", "evtstrm", "aes"}
    missing = CpuFeatures.of_this_machine(str(tmp_path / "absent"))
    assert missing.describe() == "an unknown CPU (no /proc/cpuinfo to read)"


def test_bad_arguments_name_the_value():
    with pytest.raises(TypeError, match="flags='avx2 fma'"):
        CpuFeatures("x", "avx2 fma")
    with pytest.raises(ValueError, match="extension='SSE'"):
        CpuFeatures("x", []).has("SSE")


@pytest.mark.skipif(shutil.which("lscpu") is None, reason="util-linux's lscpu is not installed")
def test_this_machine_agrees_with_lscpu():
    fields = {}
    for line in subprocess.run(
        ["lscpu"], capture_output=True, text=True, env={"LC_ALL": "C"}, check=True
    ).stdout.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    cpu = CpuFeatures.of_this_machine()
    assert cpu.model == fields["Model name"]
    assert cpu.flags == set(fields["Flags"].split())


def test_the_export_report_names_the_cpu_and_an_older_report_renders_as_before():
    report = json.loads(_read("docs", "export_report.json"))  # written before the CPU was recorded
    assert "cpu" not in report["machine"]
    assert f"round-robin rounds on {report['machine']['cpus']} CPUs (LiteRT's" in report_markdown(report)
    report["machine"]["cpu"] = CpuFeatures("AMD EPYC", ZEN3).to_dict()
    assert (
        f"round-robin rounds on {report['machine']['cpus']} CPUs of AMD EPYC "
        "(AVX2; no AVX-512, VNNI, BF16 or AMX) (LiteRT's"
    ) in report_markdown(report)
