#!/usr/bin/env bash
# Session 31 (helper, issue 16), run 2: the register-staged tree, the tile order in bands of M
# tiles (plan override group_m) and 256 x 128 blocks against the planner's plan and cuBLAS.
set -u
REPO=$(pwd)
D=$REPO/.dev/gf32
S=$D/src/benchmarks/recorded/session31-h200-f32
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
(cd $D/src && python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . > /tmp/b1.log 2>&1; echo "new build rc $?")
echo "build at $(( $(date +%s) - t0 )) s"
cd /tmp
export PYTHONPATH=/tmp/site:$D/src/benchmarks
ONLY=auto,cublas,gm4,gm8,gm16,gm32,wg4x2 timeout 120 python3 $S/f32plans.py 4096x4096x4096,2048x2048x2048,1000x4096x4096 3 2>&1 | grep -v "^$"
echo "at $(( $(date +%s) - t0 )) s"
ONLY=auto,cublas,gm8,gm16 timeout 80 python3 $S/f32plans.py 8192x8192x8192 3 2>&1 | grep -v "^$"
echo "done in $(( $(date +%s) - t0 )) s"
