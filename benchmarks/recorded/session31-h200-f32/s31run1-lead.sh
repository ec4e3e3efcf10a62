#!/usr/bin/env bash
# Session 31, lead run 1: build with the default g++ (13), the session-30 scaled-alpha/beta GPU tests (never run on a GPU before).
set -u
REPO=$(pwd)
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb -Ccmake.define.COOPJIT_WERROR=ON . 2>&1 | tail -30
echo "build: rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site
cd /tmp
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
COOPJIT_TEST_DEVICE=cuda:0 timeout 150 python3 -m pytest -p no:cacheprovider -n 16 -q -p no:benchmark $REPO/tests/test_cuda_scaled_s30.py -rs 2>&1 | tee $OUT/scaled.txt | grep -E "passed|failed|FAILED|Error|SKIP" | tail -20
echo "done in $(( $(date +%s) - t0 )) s"
