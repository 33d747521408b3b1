#!/usr/bin/env bash
# Hardware counters of the kernels in scripts/ncu_probe.py (Nsight Compute, clocks left
# alone): DRAM bytes and throughput, L2 hit rate and sectors, achieved occupancy and the
# main stall reasons, one CSV row per kernel per metric.
#   scripts/ncu_probe.sh OUT_DIR [ncu_probe.py arguments]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-gpu-out}; shift || true
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 PYG_ACCEL_CACHE_DIR=${PYG_ACCEL_CACHE_DIR:-$PWD/.build-cache}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 -m pyg_accel.build > "$OUT_DIR/build.log" 2>&1 || { echo "build failed"; tail -20 "$OUT_DIR/build.log"; exit 1; }
METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
METRICS+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed
METRICS+=,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
METRICS+=,lts__t_sectors_srcunit_tex_op_red.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
METRICS+=,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
METRICS+=,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct
ncu --clock-control none --nvtx --nvtx-include "probe/" --metrics "$METRICS" --csv \
    python3 scripts/ncu_probe.py "$@" > "$OUT_DIR/ncu.csv" 2> "$OUT_DIR/ncu.err"
rc=$?
grep "^probe:" "$OUT_DIR/ncu.csv"
python3 - "$OUT_DIR/ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit('no ncu rows (see ncu.err)')
head, body = rows[0], rows[1:]
i_id, i_name, i_metric, i_value = (head.index(k) for k in ('ID', 'Kernel Name', 'Metric Name', 'Metric Value'))
kernels = collections.OrderedDict()
for r in body:
    kernels.setdefault((r[i_id], r[i_name][:60]), {})[r[i_metric]] = r[i_value]
for (kid, name), m in kernels.items():
    print(f'--- {kid} {name}')
    for k, v in m.items():
        print(f'    {k:70s} {v}')
PY
exit $rc
