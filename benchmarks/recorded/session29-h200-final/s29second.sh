#!/usr/bin/env bash
# Session 29's second run (warm machine, the first run's build in /tmp/site): f32 SIMT plan variants
# against cuBLAS on the H200; the planner's plans on the host's skinny rows against torch; then the
# host's quick bench sections if time is left.
set -u
REPO=$(pwd)
t0=$(date +%s)
if [ ! -d /tmp/site/coopjit ]; then
  bash .llvm22/unpack.sh > /dev/null || exit 1
  python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | tail -5
fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd /tmp
timeout ${F_T:-120} python3 $REPO/.dev/lead/f32plans.py 2048x2048x2048,4096x4096x4096,8192x8192x8192 3 > $OUT/f32plans.txt 2>&1
echo "f32plans rc $? at $(( $(date +%s) - t0 )) s"; cat $OUT/f32plans.txt | cut -c1-150
JSON=$OUT/rows.json timeout ${R_T:-120} python3 $REPO/.dev/lead/rows29.py f32_64x4096x4096 f32_16x4096x4096 int8_64x4096x4096 f32_513x129x700 f32_32x128x128x128 f32_100x37x250 > $OUT/rows.txt 2>&1
echo "rows rc $? at $(( $(date +%s) - t0 )) s"; grep -v "^  [fbi]" $OUT/rows.txt | tail -30
left=$(( ${TOTAL:-330} - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then
timeout $left python3 -m coopjit bench --quick --only shapes reduce gemm_int8 --out $OUT/hostbench > $OUT/host-bench.txt 2>&1
echo "host bench rc $? at $(( $(date +%s) - t0 )) s"; grep -v "^$" $OUT/host-bench.txt | tail -45
fi
echo "done in $(( $(date +%s) - t0 )) s"
