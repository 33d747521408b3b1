#!/usr/bin/env bash
# Before/after timing on one machine in one call: builds this tree and a base tree
# (another revision's files, e.g. `git archive REV | tar -x -C .ab-base`, carried to the
# GPU machine as an ignored path) side by side, then runs the same command in each,
# alternating, ROUNDS times (default 3), so both see the same GPU, clocks and host.
#
#   scripts/gpu_ab.sh BASE_DIR OUT_DIR CMD...
#
# CMD runs from each tree's root with that tree's extension; its output goes to
# OUT_DIR/{base,this}_ROUND.log and is echoed.
set -uo pipefail
cd "$(dirname "$0")/.."
BASE=$(cd "$1" && pwd)
OUT_DIR=$2
shift 2
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
HERE=$PWD
jobs=$(( $(nproc) / 2 ))
build() {  # build TREE: the extension into TREE/.build-cache
  (cd "$1" && MAX_JOBS=$jobs PYG_ACCEL_CACHE_DIR=$1/.build-cache PYTHONPATH=$1 python3 -m pyg_accel.build \
    > "$OUT_DIR/build_$(basename "$1").log" 2>&1) \
    || { echo "build of $1 failed:"; tail -20 "$OUT_DIR/build_$(basename "$1").log"; exit 1; }
}
build "$BASE" & b1=$!
build "$HERE" & b2=$!
wait $b1 || exit 1
wait $b2 || exit 1
echo "built both trees"
for round in $(seq "${ROUNDS:-3}"); do
  for tree in base this; do
    dir=$HERE; [ $tree = base ] && dir=$BASE
    echo "=== $tree, round $round: $*"
    (cd "$dir" && PYG_ACCEL_CACHE_DIR=$dir/.build-cache PYTHONPATH=$dir${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH} "$@") \
      2>&1 | tee "$OUT_DIR/${tree}_$round.log"
  done
done
