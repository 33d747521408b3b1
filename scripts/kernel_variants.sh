#!/usr/bin/env bash
# Builds, checks and times the compile-time variants of one kernel family (tuning
# macros in csrc/*/cuda), one library per variant, the default first.
#   scripts/kernel_variants.sh OUT_DIR gather        # csrc/gather/cuda/gather.cu: no 256 B L2 fetches
#       (-DPYG_ACCEL_GATHER_L2_256B=0), 256 B fetches for every row size (=1; the default
#       fetches them only for rows of a multiple of 256 B), and the cp.async path
#   scripts/kernel_variants.sh OUT_DIR gather_host   # host-memory gathers on SMs/k blocks (default
#       k = 4) against every SM (k = 0) and k = 2, 8: pinned-gather bandwidth, and the
#       pipelined epoch with pinned features
#   scripts/kernel_variants.sh OUT_DIR sampler       # csrc/sampling/cuda/sample_kernels.cuh: positions per
#       thread of the numbering kernel (default 2) against 1 and 4; level 0 in two
#       kernels (seeds, then numbering) instead of one block; grids of one thread per
#       item instead of capped grid-stride grids; expand with registers capped for 8
#       blocks per SM
#   scripts/kernel_variants.sh OUT_DIR sampler_hub   # the homogeneous hub_draw_kernel (weighted
#       sampling) with registers for 1 or 3 blocks per SM (the compiler's choice, 64 with
#       small spills, allows 4)
#   scripts/kernel_variants.sh OUT_DIR sparse        # csrc/sparse/cuda/sparse_vec.cuh: SpMM with registers
#       uncapped (3 blocks per SM) and capped for 5 (the default caps them for 4)
#   scripts/kernel_variants.sh OUT_DIR sparse_max    # max aggregation (scripts/max_timing.py): runs
#       of 256 or 4096 edges per group in the vectorised kernel instead of 1024 (PYG_ACCEL_MAX_RUN);
#       KERNEL_VARIANTS can set the row reductions' knobs (fp64 and unaligned forwards):
#       PYG_ACCEL_MAX_LONG_ROW, PYG_ACCEL_MAX_EDGE_UNROLL, PYG_ACCEL_MAX_ROW_FEATURES
# (The sparse kernels' two families are switched at run time:
# PYG_ACCEL_SPARSE_KERNEL=generic; benchmarks/sparse.py times both.)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-gpu-out}
FAMILY=${2:-gather}
export PYTHONUNBUFFERED=1 PYG_ACCEL_CACHE_DIR=${PYG_ACCEL_CACHE_DIR:-$PWD/.build-cache}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
case $FAMILY in
  gather) VARIANTS=(-DPYG_ACCEL_GATHER_L2_256B={0,1} -DPYG_ACCEL_GATHER_ASYNC=1); TESTS=(tests/test_gather.py)
          BENCH=(benchmarks/gather.py --no-pinned --row-bytes 128 256 400 512 1024 --reps 30) ;;
  gather_host) VARIANTS=(-DPYG_ACCEL_GATHER_HOST_SM_DIVISOR={0,2,8}); TESTS=(tests/test_gather.py)
          BENCH=(benchmarks/end_to_end.py --features pinned --tf32 --configs accel-sync accel) ;;
  sampler) VARIANTS=(-DPYG_ACCEL_NUMBER_ITEMS={1,4} -DPYG_ACCEL_SEED_ITEMS=0 -DPYG_ACCEL_SAMPLER_CAP_GRIDS=0
                   -DPYG_ACCEL_EXPAND_MIN_BLOCKS=8); TESTS=(tests/test_sampling.py)
          BENCH=(benchmarks/sampling.py --preset products --device cuda --batch-sizes 1024 4096 --fanouts 15-10-5
                 --batches 60 --baseline-batches 1) ;;
  sampler_hub) VARIANTS=(-DPYG_ACCEL_HUB_MIN_BLOCKS={1,3}); TESTS=(tests/test_sampling.py)
          BENCH=(benchmarks/sampling.py --preset products --device cuda --mode weighted --batch-sizes 1024 4096
                 --fanouts 15-10-5 --batches 60 --baseline-batches 1) ;;
  sparse) VARIANTS=(-DPYG_ACCEL_SPMM_MIN_BLOCKS={1,5}); TESTS=(tests/test_sparse_ops.py)
          BENCH=(benchmarks/sparse.py --preset products --features 16 32 64 --reps 5) ;;
  sparse_max) VARIANTS=(-DPYG_ACCEL_MAX_RUN={256,4096})
          TESTS=(tests/test_sparse_ops.py -k max); BENCH=(scripts/max_timing.py) ;;
  *) echo "unknown kernel family '$FAMILY' (gather, gather_host, sampler, sampler_hub, sparse, sparse_max)"; exit 2 ;;
esac
i=0
# KERNEL_VARIANTS='-DA=1 -DB=2' replaces the family's list (one flag per variant).
[ -n "${KERNEL_VARIANTS:-}" ] && read -r -a VARIANTS <<< "$KERNEL_VARIANTS"
for flags in "" "${VARIANTS[@]}"; do
  echo "=== $FAMILY variant $i: '${flags:-defaults}'"
  PYG_ACCEL_CUDA_FLAGS="$flags" python3 -m pyg_accel.build > /dev/null 2>&1 || { echo "build failed"; continue; }
  PYG_ACCEL_CUDA_FLAGS="$flags" python3 -m pytest "${TESTS[@]}" -q -x -p no:cacheprovider 2>&1 | tail -1
  [ "$FAMILY" = gather_host ] && PYG_ACCEL_CUDA_FLAGS="$flags" python3 scripts/pinned_gather_check.py
  PYG_ACCEL_CUDA_FLAGS="$flags" python3 "${BENCH[@]}" --out "$OUT_DIR/$FAMILY-variant$i" 2>&1 | tail -12
  i=$((i + 1))
done
