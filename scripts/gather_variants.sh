#!/usr/bin/env bash
# Builds, checks (tests/test_gather.py) and times gather-kernel variants (tuning macros
# in csrc/cuda/gather.cu) on benchmarks/gather.py, one library per variant.
#   scripts/gather_variants.sh OUT_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-gpu-out}
export PYTHONUNBUFFERED=1 PYG_ACCEL_CACHE_DIR=${PYG_ACCEL_CACHE_DIR:-$PWD/.build-cache}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
i=0
for flags in "" "-DPYG_ACCEL_GATHER_ASYNC=1"; do
  echo "=== variant $i: '${flags:-defaults}'"
  PYG_ACCEL_CUDA_FLAGS="$flags" python3 -m pyg_accel.build > /dev/null 2>&1 || { echo "build failed"; continue; }
  PYG_ACCEL_CUDA_FLAGS="$flags" python3 -m pytest tests/test_gather.py -q -x -p no:cacheprovider 2>&1 | tail -1
  PYG_ACCEL_CUDA_FLAGS="$flags" python3 benchmarks/gather.py --no-pinned --row-bytes 256 400 512 1024 --reps 30 \
    --out "$OUT_DIR/variant$i" 2>&1 | tail -6
  i=$((i + 1))
done
