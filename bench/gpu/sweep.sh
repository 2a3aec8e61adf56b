#!/usr/bin/env bash
# Several gpu_bench.py configurations in one device call (a GPU slot is ~15 minutes with
# start-up, and a machine idle for 30 s is given back, so the levers of one slot run in one
# command), from the repository root on the lent GPU machine, after `make bench-gpu-prepare`:
#
#   bash bench/gpu/sweep.sh OUTPUT_DIR NAME 'XLA_FLAGS' 'gpu_bench.py flags' [NAME ...]
#
# (the device tool: carry bench/gpu/carry, OUTPUT_DIR $OUT). CARRY and PYTHON name another
# carry folder and interpreter (tests/bench/test_gpu_bench.py: a carry without wheels, whose
# Keras the interpreter already has, and .venv-jax's python).
#
# Each configuration runs in its own process (XLA_FLAGS are read once per process) and writes
# OUTPUT_DIR/NAME.json; every run's printed lines go to OUTPUT_DIR/sweep.log, with, for each
# run whose XLA_FLAGS hold --xla_dump_to=DIR, how many cuBLASLt GEMMs of each epilogue and
# how many of XLA's GEMM kinds the optimized HLO holds (the HLO itself stays on the machine:
# the device tool returns eight files at most). A run that fails is logged and the next one
# starts; the sweep exits 1 if any did, after naming them.
set -uo pipefail
out=${1:?usage: sweep.sh OUTPUT_DIR NAME XLA_FLAGS FLAGS [NAME XLA_FLAGS FLAGS ...]}
shift
if (( $# == 0 || $# % 3 != 0 )); then
  echo "sweep.sh: configurations come in threes (NAME, XLA_FLAGS, gpu_bench flags); got $# argument(s): $*" >&2
  exit 2
fi
carry=${CARRY:-bench/gpu/carry}
python=${PYTHON:-python3}
test -f "$carry/manifest.json" || { echo "sweep.sh: $carry/manifest.json is missing: run make bench-gpu-prepare first" >&2; exit 2; }
path=$PWD
if compgen -G "$carry/wheels/*.whl" > /dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$carry"/wheels/*.whl || exit 2
  path="/tmp/site:$PWD"
fi
mkdir -p "$out"
log="$out/sweep.log"
failed=()
total=$(( $# / 3 ))
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv > "$out/nvidia_smi.csv" 2>&1 || true
while (( $# )); do
  name=$1 xla=$2 flags=$3
  shift 3
  echo "=== $name: XLA_FLAGS='$xla' gpu_bench $flags ($(date -u +%H:%M:%S))" | tee -a "$log"
  # shellcheck disable=SC2086  # the flags are a word list on purpose
  PYTHONPATH="$path" KERAS_BACKEND=jax PYTHONUNBUFFERED=1 XLA_FLAGS="$xla" \
    "$python" -m bench.gpu.gpu_bench --carry "$carry" --output "$out/$name.json" $flags 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
  echo "=== $name: exit $status" | tee -a "$log"
  (( status == 0 )) || failed+=("$name")
  dump=$(sed -n 's/.*--xla_dump_to=\([^ ]*\).*/\1/p' <<<"$xla")
  if [[ -n "$dump" && -d "$dump" ]]; then
    echo "--- $name: cuBLASLt epilogues and GEMM custom calls in the optimized HLO" | tee -a "$log"
    cat "$dump"/*after_optimizations.txt 2>/dev/null | grep -o '"epilogue":"[A-Z_]*"' | sort | uniq -c | tee -a "$log" || true
    cat "$dump"/*after_optimizations.txt 2>/dev/null | grep -o 'custom_call_target="[^"]*"' | sort | uniq -c | tee -a "$log" || true
  fi
done
if (( ${#failed[@]} )); then
  echo "sweep: ${#failed[@]} of $total configuration(s) failed: ${failed[*]}" | tee -a "$log"
  exit 1
fi
echo "sweep: all $total configuration(s) ran" | tee -a "$log"
