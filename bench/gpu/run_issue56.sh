#!/usr/bin/env bash
# Issue 56's measurements as ONE device call (about 8 minutes of an H100), from the repository root
# on the lent GPU machine, after `make bench-gpu-prepare` here:
#
#   run(command="bash bench/gpu/run_issue56.sh $OUT", carry=["bench/gpu/carry"], timeout_s=600)
#
# In order, each step under its own time limit so that a slow one cannot cost the rest:
#   1. unfused: gpu_bench through keras.ops (the H100's best configuration of levers_2/g: no Triton
#      GEMMs, batch 512, attention dropout 0, BERT's hidden dropout 0.1 and exact GELU), phases
#      pretrain + inference (BERT-base and MiniLM shapes, batch 1 and 256, raw ids in);
#   2. fused: the same with --fused-kernels (the Pallas kernels), its step profiled and its HLO dumped;
#   3. attribution: bench/gpu/attribute_hlo.py's per-kernel table of the fused step;
#   4. torch: bench/gpu/torch_peer.py, PyTorch + transformers on the same device (SDPA, bf16 autocast,
#      torch.compile), the same pretraining step and inference;
#   5. finetune (if time is left): the real MiniLM on MR, seeds 0 1 2, through the fused path;
#   6. summary: bench/gpu/issue56_summary.py's side-by-side table.
# What comes back (the device tool returns 8 files): nvidia_smi.csv, sweep.log (every step's
# printed lines), unfused.json, fused.json, fused_attribution.json, torch_peer.json,
# fused_finetune.json, summary.json.
#
# TINY=1 runs every step at toy sizes (JAX on the CPU with the kernels interpreted, PyTorch eager on
# the CPU): tests/bench/test_issue56_bench.py does, with CARRY (a carry folder), PYTHON (a python with
# JAX and Keras) and TORCH_PYTHON (one with torch and transformers) pointing at this machine's venvs.
set -uo pipefail
out=${1:?usage: run_issue56.sh OUTPUT_DIR}
carry=${CARRY:-bench/gpu/carry}
python=${PYTHON:-python3}
torch_python=${TORCH_PYTHON:-python3}
started=$SECONDS
budget=${BUDGET_S:-540}
mkdir -p "$out"
log="$out/sweep.log"
dump=/tmp/issue56_hlo_fused
profile=/tmp/issue56_profile
rm -rf "$dump" "$profile"

if [[ ${TINY:-0} == 1 ]]; then
  size=(--tiny --pretrain-steps 2 --warmup-steps 1 --deadline-s 600 --phase-reserve-s 0)
  # XLA's CPU backend compiles without LLVM's optimizations in a fraction of the time, and the toy
  # steps are few: compiling is most of this run.
  xla_flags="--xla_backend_optimization_level=0"
  torch_flags=(--tiny --no-compile --warmup-steps 1 --deadline-s 600 --phase-reserve-s 0)
  export KBERT_PALLAS_INTERPRET=1  # the kernels interpreted on JAX's CPU backend
  limit_unfused=900 limit_fused=900 limit_torch=900 budget=${BUDGET_S:-3600}
else
  size=(--pretrain-batches 512 --pretrain-steps 10 --warmup-steps 3 --deadline-s 140 --phase-reserve-s 30)
  xla_flags="--xla_gpu_enable_triton_gemm=false"
  torch_flags=(--pretrain-batches 512 --pretrain-steps 20 --latency-repeats 100 --deadline-s 200 --phase-reserve-s 40)
  limit_unfused=150 limit_fused=190 limit_torch=210
fi
common="--phases pretrain inference --attention-dropout 0 ${size[*]}"

# 1 and 2: gpu_bench through sweep.sh (each configuration its own process with its own XLA_FLAGS;
# gpu_bench's --deadline-s keeps each inside its share of the limit).
CARRY=$carry PYTHON=$python timeout $(( limit_unfused + limit_fused )) bash bench/gpu/sweep.sh "$out" \
  unfused "$xla_flags" "$common" \
  fused "$xla_flags --xla_dump_to=$dump --xla_dump_hlo_as_text" \
  "$common --fused-kernels --profile-steps 3 --profile-dir $profile"
site=$PWD
[[ -d /tmp/site ]] && site="/tmp/site:$PWD"  # sweep.sh installed the carried Keras there, if it carries wheels

# 3: the fused step's kernels by scope, and the Pallas kernels by name.
kernels=$(ls "$profile"/trace_*/kernels.json 2>/dev/null | head -n 1)
if [[ -n "$kernels" ]]; then
  echo "=== attribution of $kernels ($(date -u +%H:%M:%S))" | tee -a "$log"
  PYTHONPATH=$site KERAS_BACKEND=jax timeout 120 "$python" -m bench.gpu.attribute_hlo --kernels "$kernels" \
    --dump "$dump" --output "$out/fused_attribution.json" 2>&1 | tee -a "$log"
else
  echo "=== attribution: no kernels.json under $profile (the fused run's profile failed)" | tee -a "$log"
fi

# 4: the PyTorch peer (the image's python3 holds torch and transformers; no Keras needed), within
# what is left of the budget.
left=$(( budget - (SECONDS - started) - 20 ))
(( left < limit_torch )) && limit_torch=$(( left > 60 ? left : 60 ))
echo "=== torch_peer, at most $limit_torch s ($(date -u +%H:%M:%S))" | tee -a "$log"
PYTHONPATH=$PWD PYTHONUNBUFFERED=1 timeout "$limit_torch" "$torch_python" -m bench.gpu.torch_peer \
  --output "$out/torch_peer.json" "${torch_flags[@]}" 2>&1 | tee -a "$log"
echo "=== torch_peer: exit ${PIPESTATUS[0]}" | tee -a "$log"

# 5: the MR fine-tune through the fused path, with what is left of the budget (not in TINY: the
# toy carry holds no MiniLM).
left=$(( budget - (SECONDS - started) ))
if [[ ${TINY:-0} != 1 && $left -gt 90 ]]; then
  CARRY=$carry PYTHON=$python timeout $(( left - 15 )) bash bench/gpu/sweep.sh "$out" fused_finetune "$xla_flags" \
    "--phases finetune --fused-kernels --seeds 0 1 2 --deadline-s $(( left - 30 )) --phase-reserve-s 40"
else
  echo "=== fused_finetune: skipped, $left s of the budget left" | tee -a "$log"
fi

# 6: the side-by-side table.
PYTHONPATH=$PWD "$python" -m bench.gpu.issue56_summary "$out" 2>&1 | tee -a "$log"
echo "run_issue56: done in $(( SECONDS - started )) s" | tee -a "$log"
