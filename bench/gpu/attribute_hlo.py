"""Which part of the model each GPU kernel of a training step belongs to: joins the kernel
times of gpu_bench's profile (kernel name -> ms per step) with XLA's optimized HLO of the step
(`XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text`), whose fusions carry the `op_name`
metadata of the ops fused into them. Keras' JAX backend opens a `jax.named_scope` per layer,
so an op_name reads like `jit(train_step)/.../transformer_layer_3/output_layer_norm/mul`,
and the backward pass's ops sit under `transpose(jvp(...))`.

A fusion's kernel is named after its HLO instruction with "." made "_"
(`loop_convert_multiply_fusion.11` -> `loop_convert_multiply_fusion_11`); cuBLAS and cuDNN
kernels (nvjet_*, cudnn_*) have no such name and are counted by kind only. The Pallas kernels of
`fused_kernels=True` (keras_bert_impl/kernels/) are Triton custom calls named after their
`pallas_call`, and are summed under those names (`pallas_ms_per_step`).

    python -m bench.gpu.attribute_hlo --kernels KERNELS.json --dump DIR --output OUT.json
"""

import argparse
import collections
import glob
import json
import os
import re

# `  ROOT %name.1 = f32[2,3]{1,0} opcode(operands), attr=..., metadata={op_name="..." ...}`;
# the type may be a tuple with spaces, so the opcode is the first word right before "(".
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s([\w\-]+)\((.*)$")
HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
CALLS = re.compile(r"calls=%?([\w.\-]+)")
OP_NAME = re.compile(r'op_name="([^"]*)"')
WRAPPED = re.compile(r"(?:transpose\()?(?:jvp|vjp)\(([\w\-]*)\)+")
LAYER_INDEX = re.compile(r"_(\d+)(?=/|$)")
# The pallas_call names of keras_bert_impl/kernels/, longest first (a backward kernel's name holds
# its forward's).
PALLAS_KERNELS = (
    "residual_dropout_layer_norm_backward",
    "residual_dropout_layer_norm",
    "bias_gelu_backward",
    "bias_gelu",
)


def parse_hlo(text):
    """{computation: [instruction dicts]} and the ENTRY computation's name."""
    computations, entry, current = {}, None, None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            header = HEADER.match(line)
            if header:
                current = header.group(1)
                computations[current] = []
                if line.startswith("ENTRY"):
                    entry = current
            elif line.startswith("}"):
                current = None
            continue
        if current is None:
            continue
        match = INSTRUCTION.match(line)
        if not match:
            continue
        name, shape, opcode, rest = match.groups()
        calls = CALLS.search(rest)
        op_name = OP_NAME.search(rest)
        computations[current].append(
            {
                "name": name,
                "shape": shape,
                "opcode": opcode,
                "calls": calls.group(1) if calls else None,
                "op_name": op_name.group(1) if op_name else None,
            }
        )
    return computations, entry


def scope_of(op_name):
    """A short, layer-index-free key for an op_name: the Keras scope path (jit() wrappers
    dropped, `jvp(name)` and `transpose(jvp(name))` read as `name`, layer numbers as N),
    prefixed 'bwd' for the backward pass (under transpose()) and 'fwd' otherwise."""
    if not op_name:
        return "(no op_name)"
    backward = "transpose(" in op_name
    parts = []
    for part in op_name.split("/"):
        wrapped = WRAPPED.fullmatch(part)
        if wrapped:
            parts.extend([wrapped.group(1)] if wrapped.group(1) else [])
        elif part and not part.startswith(("jit(", "pjit(", "checkpoint")):
            parts.append(part)
    return ("bwd " if backward else "fwd ") + "/".join(LAYER_INDEX.sub("_N", p) for p in parts)


def fusions_by_kernel(computations):
    """{kernel name: the fusion instruction (with its called computation's instructions)}."""
    found = {}
    for instructions in computations.values():
        for instruction in instructions:
            if instruction["calls"] and instruction["opcode"] in ("fusion", "custom-call"):
                kernel = instruction["name"].replace(".", "_").replace("-", "_")
                found[kernel] = dict(instruction, body=computations.get(instruction["calls"], []))
    return found


def attribute(kernels_ms, computations, top=60):
    """Per kernel its fused ops' scopes; summed ms per scope (each kernel given to the most
    frequent scope among its ops) and per kind (mapped fusion, or unmapped library kernel)."""
    fusions = fusions_by_kernel(computations)
    by_scope, rows, unmapped, pallas = collections.Counter(), [], collections.Counter(), collections.Counter()
    for kernel, ms in sorted(kernels_ms.items(), key=lambda item: -item[1]):
        fusion = fusions.get(kernel)
        ours = next((name for name in PALLAS_KERNELS if name in kernel), None)
        if fusion is None and ours:
            pallas[ours] += ms
            continue
        if fusion is None:
            unmapped[kernel[:60]] += ms
            continue
        scopes = collections.Counter(scope_of(i["op_name"]) for i in fusion["body"] if i["op_name"])
        if not scopes and fusion["op_name"]:
            scopes[scope_of(fusion["op_name"])] += 1
        main = scopes.most_common(1)[0][0] if scopes else "(no op_name)"
        by_scope[main] += ms
        if len(rows) < top:
            opcodes = collections.Counter(i["opcode"] for i in fusion["body"] if i["opcode"] != "parameter")
            rows.append(
                {
                    "kernel": kernel,
                    "ms_per_step": ms,
                    "shape": fusion["shape"][:120],
                    "opcodes": dict(opcodes.most_common(10)),
                    "scopes": dict(scopes.most_common(6)),
                }
            )
    return {
        "by_scope_ms_per_step": dict(by_scope.most_common()),
        "unmapped_ms_per_step": dict(unmapped.most_common(20)),
        "pallas_ms_per_step": dict(pallas.most_common()),
        "pallas_total_ms_per_step": sum(pallas.values()),
        "mapped_ms_per_step": sum(by_scope.values()),
        "unmapped_total_ms_per_step": sum(unmapped.values()),
        "top_kernels": rows,
    }


def largest_module(dump):
    """The optimized HLO text of the largest module in an XLA dump folder (the train step)."""
    files = glob.glob(os.path.join(dump, "*after_optimizations.txt"))
    if not files:
        raise SystemExit(
            f"no *after_optimizations.txt under {dump!r}: was XLA_FLAGS=--xla_dump_to={dump} "
            "--xla_dump_hlo_as_text set for the run?"
        )
    return max(files, key=os.path.getsize)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument(
        "--kernels", required=True, help="JSON {kernel name: ms per step} (gpu_bench's profile folder)"
    )
    parser.add_argument("--dump", required=True, help="the XLA dump folder")
    parser.add_argument("--output", required=True)
    parser.add_argument("--top", type=int, default=60)
    args = parser.parse_args(argv)
    with open(args.kernels, encoding="utf-8") as f:
        kernels_ms = json.load(f)
    module = largest_module(args.dump)
    with open(module, encoding="utf-8") as f:
        computations, _ = parse_hlo(f.read())
    report = {
        "module": os.path.basename(module),
        "kernels": len(kernels_ms),
        "kernel_ms_per_step": sum(kernels_ms.values()),
        **attribute(kernels_ms, computations, args.top),
    }
    os.environ.setdefault("KERAS_BACKEND", "jax")  # the GPU machine has no TensorFlow, Keras' default
    from keras_bert_impl.atomic_write import write_json_atomically

    write_json_atomically(report, args.output, indent=1)
    for scope, ms in list(report["by_scope_ms_per_step"].items())[:25]:
        print(f"{ms:7.2f} ms  {scope}")
    for name, ms in report["pallas_ms_per_step"].items():
        print(f"{ms:7.2f} ms  pallas {name}")
    print(
        f"mapped {report['mapped_ms_per_step']:.1f} ms, Pallas {report['pallas_total_ms_per_step']:.1f} ms, "
        f"unmapped (library kernels) "
        f"{report['unmapped_total_ms_per_step']:.1f} ms of {report['kernel_ms_per_step']:.1f} ms per step"
    )


if __name__ == "__main__":
    main()
