"""bench/gpu/attribute_hlo.py on lines in the form XLA 0.11.2 (JAX 0.11.2) writes them for the
GPU: taken from the optimized HLO of a BERT-base training step dumped on an H100
(bench/results/gpu/levers_2/), shortened to the lines the join reads."""

from bench.gpu.attribute_hlo import attribute, parse_hlo, scope_of

HLO = """HloModule jit_train_step, is_scheduled=true

%fused_convert_multiply.11 (param_0.21962: bf16[32768,3072], param_1.30073: bf16[3072]) -> (bf16[32768,3072], bf16[32768,3072]) {
  %param_0.21962 = bf16[32768,3072]{1,0} parameter(0), metadata={scheduling_name="param_0.21962"}
  %param_1.30073 = bf16[3072]{0} parameter(1), metadata={scheduling_name="param_1.30073"}
  %add.1550.7 = bf16[32768,3072]{1,0} broadcast(%param_1.30073), dimensions={1}, metadata={op_name="jit(train_step)/jvp(bert_backbone)/transformer_layer_0/feed_forward/intermediate/add" scheduling_name="add.1550.7"}
  %multiply.9 = bf16[32768,3072]{1,0} multiply(%add.1550.7, %param_0.21962), metadata={op_name="jit(train_step)/jvp(bert_backbone)/transformer_layer_0/feed_forward/intermediate/erfc"}
  ROOT %tuple.3 = (bf16[32768,3072]{1,0}, bf16[32768,3072]{1,0}) tuple(%multiply.9, %param_0.21962), metadata={op_name="jit(train_step)/jvp(bert_backbone)/transformer_layer_0/feed_forward/intermediate/erfc"}
}

%fused_dot.51 (parameter_0.52: f32[256,2], parameter_1.52: bf16[2,768]) -> bf16[256,768] {
  %convert_element_type.93 = bf16[256,2]{1,0} convert(%parameter_0.52), metadata={op_name="jit(train_step)/transpose(jvp())/convert_element_type" scheduling_name="convert_element_type.93"}
  ROOT %dot_general.51 = bf16[256,768]{1,0} dot(%convert_element_type.93, %parameter_1.52), lhs_contracting_dims={1}, rhs_contracting_dims={1}, metadata={op_name="jit(train_step)/transpose(jvp(next_sentence_head))/dense/dot_general" scheduling_name="dot_general.51"}
}

ENTRY %main.553 (state_0__0_.1: f32[512,768], data_0.1: s32[256,128]) -> (f32[], f32[512,768]) {
  %loop_convert_multiply_fusion.11 = (bf16[32768,3072]{1,0}, bf16[32768,3072]{1,0}) fusion(%custom-call.1, %wrapped_convert.5), kind=kLoop, calls=%fused_convert_multiply.11, metadata={op_name="jit(train_step)/jvp(bert_backbone)/transformer_layer_0/feed_forward/intermediate/mul"}
  %gemm_fusion_dot.51 = bf16[256,768]{1,0} fusion(%a, %b), kind=kCustom, calls=%fused_dot.51, metadata={op_name="jit(train_step)/transpose(jvp(next_sentence_head))/dense/dot_general"}
  ROOT %tuple.9 = (f32[], f32[512,768]{1,0}) tuple(%x, %y)
}
"""


def test_scopes_drop_the_jit_wrappers_number_the_layers_n_and_mark_the_backward_pass():
    assert (
        scope_of("jit(train_step)/jvp(bert_backbone)/transformer_layer_11/output_layer_norm/mul")
        == "fwd bert_backbone/transformer_layer_N/output_layer_norm/mul"
    )
    assert (
        scope_of("jit(train_step)/transpose(jvp(next_sentence_head))/dense/dot_general")
        == "bwd next_sentence_head/dense/dot_general"
    )
    assert scope_of("jit(train_step)/transpose(jvp())/convert_element_type") == "bwd convert_element_type"
    assert scope_of(None) == "(no op_name)"


def test_kernels_join_their_fusions_by_name_and_library_kernels_stay_unmapped():
    computations, entry = parse_hlo(HLO)
    assert entry == "main.553"
    assert [i["opcode"] for i in computations["fused_convert_multiply.11"]] == [
        "parameter",
        "parameter",
        "broadcast",
        "multiply",
        "tuple",
    ]
    kernels = {
        "loop_convert_multiply_fusion_11": 3.5,
        "gemm_fusion_dot_51": 0.5,
        "nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_splitK_NTN": 9.0,
    }
    report = attribute(kernels, computations)
    # Each kernel goes to the scope most of its fused ops carry (ties: the first in the body).
    assert report["by_scope_ms_per_step"] == {
        "fwd bert_backbone/transformer_layer_N/feed_forward/intermediate/erfc": 3.5,
        "bwd convert_element_type": 0.5,
    }
    assert report["unmapped_ms_per_step"] == {"nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_splitK_NTN": 9.0}
    assert report["mapped_ms_per_step"] == 4.0
    top = report["top_kernels"][0]
    assert top["kernel"] == "loop_convert_multiply_fusion_11" and top["opcodes"] == {
        "broadcast": 1,
        "multiply": 1,
        "tuple": 1,
    }
