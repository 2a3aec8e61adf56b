"""bench/perf/cpu_peers.py's pieces that need no model: reading oneDNN's verbose lines (the check
that ONEDNN_MAX_CPU_ISA took effect, issue 33) and the results file of every CPU kind (a run
replaces its own kind's entry; the earlier one-run form migrates unchanged)."""

import json
import os

from bench.perf.cpu_peers import cap_took_effect, parse_onednn_verbose, results_by_cpu
from tests.conftest import REPO

# oneDNN 3.7.3's lines as TensorFlow 2.20 printed them on the Intel Xeon with AVX512-VNNI (no
# BF16, no AMX), natively and under ONEDNN_MAX_CPU_ISA=AVX2 (a 64x384 fp32 matmul, a 4x64x32
# batch matmul; the capped child then crashed on a bf16 matmul, after these lines).
NATIVE = """\
onednn_verbose,v1,info,oneDNN v3.7.3 (commit N/A)
onednn_verbose,v1,info,cpu,runtime:threadpool,nthr:2
onednn_verbose,v1,info,cpu,isa:Intel AVX-512 with Intel DL Boost
onednn_verbose,v1,primitive,info,template:operation,engine,primitive,implementation,prop_kind,memory_descriptors
(64, 384)
onednn_verbose,v1,primitive,exec,cpu,gemm_api,,undef,src_f32::blocked:ab:f0 wei_f32::blocked:ab:f0,,,64x384:384x384,86.1
onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core,undef,src:f32::blocked:abc::f0,,,4x64x32:4x32x64,5.2
onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core,undef,src:f32::blocked:abc::f0,,,4x64x32:4x32x64,0.3
"""
CAPPED = """\
onednn_verbose,v1,info,cpu,isa:Intel AVX2
onednn_verbose,v1,primitive,exec,cpu,gemm_api,,undef,src_f32::blocked:ab:f0 wei_f32::blocked:ab:f0,,,64x384:384x384,29.8
onednn_verbose,v1,primitive,exec,cpu,matmul,gemm:jit:f32,undef,src:f32::blocked:abc::f0,,,4x64x32:4x32x64,0.2
"""


def test_the_verbose_lines_give_the_isa_and_each_implementation():
    assert parse_onednn_verbose(NATIVE) == {
        "isa": "Intel AVX-512 with Intel DL Boost",
        "implementations": {"gemm_api:unnamed": 1, "matmul:brg_matmul:avx512_core": 2},
    }
    assert parse_onednn_verbose(CAPPED) == {
        "isa": "Intel AVX2",
        "implementations": {"gemm_api:unnamed": 1, "matmul:gemm:jit:f32": 1},
    }
    assert parse_onednn_verbose("no oneDNN here\n") == {"isa": None, "implementations": {}}


def test_the_cap_counts_as_taken_only_when_no_avx512_is_reported_or_run():
    assert cap_took_effect(parse_onednn_verbose(CAPPED))
    assert not cap_took_effect(parse_onednn_verbose(NATIVE))
    # An AVX2 ISA line with an AVX-512 kernel run anyway is not a cap.
    leaky = (
        CAPPED + "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core,undef,x,,,1x1:1x1,0.1\n"
    )
    assert not cap_took_effect(parse_onednn_verbose(leaky))


def _run(model, simd, figure):
    return {
        "benchmark": "cpu_peers",
        "machine": {"cpu_model": model, "cpu_simd": simd},
        "runtimes": {"x": figure},
    }


def test_each_cpu_kind_keeps_its_own_run(tmp_path):
    path = str(tmp_path / "cpu_peers.json")
    epyc = _run("AMD EPYC", ["avx", "avx2", "fma"], 1)
    # The earlier form: one run at the top level; it becomes its CPU kind's entry, unchanged.
    with open(path, "w", encoding="utf-8") as f:
        json.dump(epyc, f)
    xeon = _run("Intel Xeon", ["avx2", "avx512f", "avx512_vnni"], 2)
    both = results_by_cpu(path, xeon)
    assert both == {
        "benchmark": "cpu_peers",
        "runs": {
            "AMD EPYC (AVX2; no AVX-512, VNNI, BF16 or AMX)": epyc,
            "Intel Xeon (AVX2, AVX-512, VNNI; no BF16 or AMX)": xeon,
        },
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(both, f)
    # A later run of one kind replaces only that kind's entry.
    again = _run("Intel Xeon", ["avx2", "avx512f", "avx512_vnni"], 3)
    assert results_by_cpu(path, again)["runs"] == {
        **both["runs"],
        "Intel Xeon (AVX2, AVX-512, VNNI; no BF16 or AMX)": again,
    }
    assert results_by_cpu(str(tmp_path / "new.json"), epyc) == {
        "benchmark": "cpu_peers",
        "runs": {"AMD EPYC (AVX2; no AVX-512, VNNI, BF16 or AMX)": epyc},
    }


def test_the_committed_file_holds_one_run_per_cpu_kind(tmp_path):
    with open(os.path.join(REPO, "bench", "results", "cpu_peers.json"), encoding="utf-8") as f:
        results = json.load(f)
    assert results["benchmark"] == "cpu_peers" and results["runs"]
    for kind, run in results["runs"].items():
        assert results_by_cpu(str(tmp_path / "absent.json"), run)["runs"] == {kind: run}
        assert run["benchmark"] == "cpu_peers" and run["machine"]["loadavg_at_start"], kind
        capped = run.get("isa", {}).get("onednn_capped_at_avx2", [])
        if capped:  # a capped pass is on an AVX-512 CPU, with its check recorded
            assert "AVX-512" in kind and "no AVX-512" not in kind
            for name, record in run["isa"]["onednn_dispatch"].items():
                if record["ONEDNN_MAX_CPU_ISA"]:
                    assert record["cap_took_effect"] is True and cap_took_effect(record), (kind, name)
                else:
                    assert "AVX-512" in record["isa"] and record["returncode"] == 0, (kind, name)
