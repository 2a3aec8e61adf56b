"""bench/perf/litert_profile.py's reading of `perf script -F ip,sym` on stacks in the form perf 6.1
printed them for LiteRT 2.3 running our int8 classifier (shortened to the frames the
categories read): a copy counts where its caller puts it."""

from bench.perf.litert_profile import categorize, parse_perf_script, summarize

SCRIPT = """
\t    7f00000a1000 xnn_qd8_f32_qc8w_gemm_minmax_ukernel_5x64c4__asm_amd64_avx512vnni
\t    7f00000a2000 xnn_compute_hmp_qp8gemm
\t    7f00000a3000 thread_main

\t    7f00000b1000 __memmove_evex_unaligned_erms
\t    7f00000b2000 xnn_compute_transposev_4d
\t    7f00000b3000 thread_parallelize_4d_tile_2d_dynamic

\t    7f00000c1000 __memmove_evex_unaligned_erms
\t    7f00000c2000 tflite::ops::builtin::unpack::(anonymous namespace)::UnpackImpl<unsigned int>
\t    7f00000c3000 tflite::ops::builtin::unpack::(anonymous namespace)::Eval

\t    7f00000d1000 __memmove_evex_unaligned_erms
\t    7f00000d2000 thread_parallelize_1d_tile_1d_dynamic
\t    7f00000d3000 pthreadpool_parallelize

\t    7f00000e1000 xnn_f32_rminmax_ukernel__avx512f_u64_acc4

\t    7f00000f1000 xnn_f32_vadd_ukernel__avx512f_u32

\t    7f0000101000 xnn_f32_vgelu_ukernel__avx512f_rational_12_10_div_u32

\t    7f0000111000 xnn_f32_gemm_minmax_ukernel_7x32__avx512f_broadcast
"""


def test_every_sample_lands_where_its_kernel_or_the_copy_caller_says():
    samples = parse_perf_script(SCRIPT)
    assert len(samples) == 8 and samples[1][1] == "xnn_compute_transposev_4d"
    assert [categorize(stack) for stack in samples] == [
        "int8 matmuls (fully connected)",
        "transposes",
        "TFLite kernels outside XNNPACK",
        "copies (reshapes, slices, concatenations)",
        "quantizing activations",
        "elementwise (residuals, LayerNorm, mask)",
        "GELU",
        "float matmuls",
    ]
    assert categorize(["something_else"]) == "other (interpreter, Python, kernel)"


def test_shares_times_the_forward_give_milliseconds():
    summary = summarize(parse_perf_script(SCRIPT), ms_per_forward=40.0)
    assert summary["samples"] == 8
    assert summary["by_category"]["int8 matmuls (fully connected)"] == {"share": 0.125, "ms": 5.0}
    assert abs(sum(v["share"] for v in summary["by_category"].values()) - 1) < 1e-12
    assert summary["top_symbols"]["__memmove_evex_unaligned_erms"] == 3 / 8
