#!/usr/bin/env bash
# The GPU benchmark as one command on the lent GPU machine (Python 3.12 with JAX and CUDA,
# no Keras, no network), from the repository root, after `make bench-gpu-prepare` here:
#
#   bash bench/gpu/run.sh [OUTPUT_DIR] [gpu_bench.py flags...]
#
# (the device tool: carry bench/gpu/carry, OUTPUT_DIR $OUT). It installs the carried wheels
# into /tmp/site (no index, no dependencies), then runs bench/gpu/gpu_bench.py on the JAX
# backend; the results file is OUTPUT_DIR/gpu_bench.json, its log OUTPUT_DIR/gpu_bench.log.
set -euo pipefail
out=${1:-bench/results}
shift || true
carry=bench/gpu/carry
test -f "$carry/manifest.json" || { echo "run.sh: $carry/manifest.json is missing: run make bench-gpu-prepare first" >&2; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$carry"/wheels/*.whl
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv > "$out/nvidia_smi.csv" 2>&1 || true
PYTHONPATH="/tmp/site:$PWD" KERAS_BACKEND=jax PYTHONUNBUFFERED=1 \
  python3 -m bench.gpu.gpu_bench --carry "$carry" --output "$out/gpu_bench.json" "$@" 2>&1 | tee "$out/gpu_bench.log"
