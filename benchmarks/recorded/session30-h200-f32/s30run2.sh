#!/usr/bin/env bash
# Session 30, lead run 2: the FMA pipeline's row-major panels (f32 / f64 on CUDA cores):
# correctness against float64, ptxas -v / SASS mix, timing against cuBLAS, ncu, test_cuda.py.
set -u
REPO=$(pwd)
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb -Ccmake.define.COOPJIT_WERROR=ON . 2>&1 | tail -30
echo "build: rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site
cd /tmp
timeout 150 python3 $REPO/.dev/lead/f32check.py > $OUT/f32check.txt 2>&1; echo "check rc $?"; grep -c WRONG $OUT/f32check.txt; tail -4 $OUT/f32check.txt
echo "at $(( $(date +%s) - t0 )) s"
COOPJIT_TEST_DEVICE=cuda:0 timeout 100 python3 -m pytest -p no:cacheprovider -n 16 -q -p no:benchmark $REPO/tests/test_cuda.py 2>&1 | tail -3
echo "tests at $(( $(date +%s) - t0 )) s"
python3 $REPO/.dev/lead/f32ptx.py /tmp/ptx
for b in auto kb16 wg4x2 st3; do f=/tmp/ptx/$b.ptx; ptxas -arch=sm_90 -v -o /tmp/ptx/$b.cubin $f 2>&1 | grep -E "registers|spill" | tr '\n' ' ' | sed "s|^|$b: |"; echo
  cuobjdump --dump-sass /tmp/ptx/$b.cubin > /tmp/ptx/$b.sass 2>/dev/null; echo "  sass: $(grep -c FFMA /tmp/ptx/$b.sass) FFMA $(grep -c 'LDS' /tmp/ptx/$b.sass) LDS $(grep -c -E 'IMAD|IADD|LEA|LOP3|SHF' /tmp/ptx/$b.sass) int $(grep -c -E 'STL|LDL' /tmp/ptx/$b.sass) local"; done
cp /tmp/ptx/auto.sass $OUT/auto.sass 2>/dev/null
ONLY=auto,cublas,kb16,wg4x2,st3,wg2x4 timeout 120 python3 $REPO/.dev/lead/f32plans.py 4096x4096x4096,2048x2048x2048,8192x8192x8192,1000x4096x4096 3 2>&1 | tee $OUT/f32plans.txt | grep -v "^$"
echo "plans at $(( $(date +%s) - t0 )) s"
timeout 60 ncu --clock-control none -k regex:"coopjit|gemm|sgemm|cutlass|xmma|Kernel" -c 4 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis python3 $REPO/.dev/lead/f32ncu.py > $OUT/f32ncu.txt 2>&1
echo "ncu rc $? at $(( $(date +%s) - t0 )) s"
grep -E "^  [a-zA-Z_]|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Duration|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|Block Size|Grid Size|Static Shared" $OUT/f32ncu.txt | cut -c1-120 | head -60
echo "done in $(( $(date +%s) - t0 )) s"
