#!/usr/bin/env bash
# Session 30 last run: the merged tree on the H200 and its host.
# The device test files this session's changes reach (s30tests.txt: CUDA, Hopper,
# AMX hardware, the new files), the GPU bench (2048, 4096, 8192), and the host's quick bench
# sections if time is left.
set -u
REPO=$(pwd)
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb -Ccmake.define.COOPJIT_WERROR=ON . 2>&1 | tail -30
echo "build: rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s (g++ $(g++ -dumpfullversion)) at $(git -C $REPO log -1 --format=%h 2>/dev/null)"
export PYTHONPATH=/tmp/site
cd /tmp
COOPJIT_TEST_DEVICE=cuda:0 timeout ${GPU_T:-150} python3 -m pytest -p no:cacheprovider -n 16 -rfEs --timeout=${PT:-90} --timeout-method=thread -p no:benchmark \
  $(for t in $(cat $REPO/.dev/lead/${TESTS:-s30tests.txt}); do echo $REPO/$t; done | awk '!s[$0]++') > $OUT/gpu-tests.log 2>&1
echo "gpu pytest rc $? at $(( $(date +%s) - t0 )) s"
pkill -f "python3 -m pytest" ; pkill -f "execnet|xdist|sys.stdin.readlin" ; sleep 3  # a timed-out pytest leaves its workers running (session 27: they took cores from the host bench)
grep -E "^(FAILED|ERROR)| passed| failed|Timeout|crashed" $OUT/gpu-tests.log | tail -30
ONLY=auto,cublas,wg4x2,wg2x4 timeout 40 python3 $REPO/.dev/lead/f32plans.py 4096x4096x4096 3 2>&1 | grep -v "^$"
timeout ${B_T:-170} python3 -m coopjit bench --device cuda:0 --out $OUT/gpubench > $OUT/gpu-bench.txt 2>&1
echo "gpu bench rc $? at $(( $(date +%s) - t0 )) s"; tail -22 $OUT/gpu-bench.txt
left=$(( ${TOTAL:-420} - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then
timeout $left python3 -m coopjit bench --quick --only shapes reduce gemm_int8 --out $OUT/hostbench > $OUT/host-bench.txt 2>&1
echo "host bench rc $? at $(( $(date +%s) - t0 )) s"; grep -v "^$" $OUT/host-bench.txt | tail -45
fi
echo "done in $(( $(date +%s) - t0 )) s"
