#!/usr/bin/env bash
# Session 30, lead run 1: f32 on the H200's CUDA cores (ptxas -v, SASS mix, plan variants vs cuBLAS, ncu),
# and the host's test_inline_b_shares_s29 (never run on the 16-core host's merged tree).
set -u
REPO=$(pwd)
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb -Ccmake.define.COOPJIT_WERROR=ON . 2>&1 | tail -30
echo "build: rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site
cd /tmp
python3 $REPO/.dev/lead/f32ptx.py /tmp/ptx
for f in /tmp/ptx/*.ptx; do b=$(basename $f .ptx); ptxas -arch=sm_90 -v -o /tmp/ptx/$b.cubin $f 2>&1 | grep -E "registers|spill" | tr '\n' ' ' | sed "s|^|$b: |"; echo
  cuobjdump --dump-sass /tmp/ptx/$b.cubin > /tmp/ptx/$b.sass 2>/dev/null; echo "  sass: $(grep -c FFMA /tmp/ptx/$b.sass) FFMA $(grep -c 'LDS' /tmp/ptx/$b.sass) LDS $(grep -c 'LDS.128' /tmp/ptx/$b.sass) LDS.128 $(grep -c -E 'IMAD|IADD|LEA|LOP3|SHF' /tmp/ptx/$b.sass) int $(grep -c BAR /tmp/ptx/$b.sass) BAR $(grep -c -E 'STL|LDL' /tmp/ptx/$b.sass) local"; done
cp /tmp/ptx/auto.sass $OUT/auto.sass 2>/dev/null
echo "ptx at $(( $(date +%s) - t0 )) s"
timeout 200 python3 $REPO/.dev/lead/f32plans.py 4096x4096x4096,2048x2048x2048,8192x8192x8192 3 2>&1 | tee $OUT/f32plans.txt | grep -v "^$"
echo "plans at $(( $(date +%s) - t0 )) s"
timeout 100 ncu --clock-control none -c 4 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis python3 $REPO/.dev/lead/f32ncu.py > $OUT/f32ncu.txt 2>&1
echo "ncu rc $? at $(( $(date +%s) - t0 )) s"
grep -E "^  [a-z_]|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Duration|Warp Cycles Per Issued|Stall|Block Limit|Issue Slots Busy|Executed Ipc A|Shared Memory|Bank" $OUT/f32ncu.txt | head -90
timeout 90 python3 -m pytest -p no:cacheprovider -n 16 -q -p no:benchmark $REPO/tests/test_inline_b_shares_s29.py 2>&1 | tail -5
echo "done in $(( $(date +%s) - t0 )) s"
