#!/usr/bin/env bash
# Session 31 (helper, issue 16), run 3: K steps of 16 (no spills with the register-staged panel)
# against the planner's kb 8 and cuBLAS.
set -u
REPO=$(pwd)
D=$REPO/.dev/gf32
S=$D/src/benchmarks/recorded/session31-h200-f32
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
(cd $D/src && python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . > /tmp/b1.log 2>&1; echo "new build rc $?")
cd /tmp
export PYTHONPATH=/tmp/site:$D/src/benchmarks
ONLY=auto,cublas,kb16,st3 timeout 100 python3 $S/f32plans.py 4096x4096x4096,2048x2048x2048,8192x8192x8192 3 2>&1 | grep -v "^$"
echo "done in $(( $(date +%s) - t0 )) s"
