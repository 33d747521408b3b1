#!/usr/bin/env bash
# Builds, checks (tests/test_sparse_ops.py) and times SpMM kernel variants (macros in
# csrc/cuda/sparse.cu) on benchmarks/sparse.py, one library per variant.
#   scripts/sparse_variants.sh OUT_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-gpu-out}
export PYTHONUNBUFFERED=1 PYG_ACCEL_CACHE_DIR=${PYG_ACCEL_CACHE_DIR:-$PWD/.build-cache}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
i=0
for flags in "" "-DPYG_ACCEL_SPMM_V2=1"; do
  echo "=== variant $i: '${flags:-defaults}'"
  PYG_ACCEL_CUDA_FLAGS="$flags" python3 -m pyg_accel.build > /dev/null 2>&1 || { echo "build failed"; continue; }
  PYG_ACCEL_CUDA_FLAGS="$flags" python3 -m pytest tests/test_sparse_ops.py tests/test_nn.py -q -x -p no:cacheprovider 2>&1 | tail -1
  PYG_ACCEL_CUDA_FLAGS="$flags" python3 benchmarks/sparse.py --preset products --features 16 32 64 128 256 --reps 5 \
    --out "$OUT_DIR/variant$i" 2>&1 | grep -A8 'median ms'
  i=$((i + 1))
done
