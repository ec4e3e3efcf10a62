#!/usr/bin/env bash
# Session 31, lead run 2: the fixed scaled-alpha/beta GPU tests; the AMX step ceiling on the 16-core host.
set -u
REPO=$(pwd)
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb -Ccmake.define.COOPJIT_WERROR=ON . 2>&1 | tail -30
echo "build: rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site
gcc -O2 -mamx-tile -mamx-bf16 -mavx512f -mprfchw -o /tmp/amx_step_ceiling benchmarks/amx_step_ceiling.c
cd /tmp
COOPJIT_TEST_DEVICE=cuda:0 timeout 100 python3 -m pytest -p no:cacheprovider -n 16 -q -p no:benchmark $REPO/tests/test_cuda_scaled_s30.py -rs 2>&1 | tee $OUT/scaled.txt | grep -E "passed|failed|FAILED|Error|SKIP" | tail -8
lscpu | grep -E "Model name|^CPU\(s\)|L2"
(echo "16-core host, vCPU 3"; timeout 120 taskset -c 3 /tmp/amx_step_ceiling 5) 2>&1 | tee $OUT/amx_step_ceiling_emr16.txt
echo "done in $(( $(date +%s) - t0 )) s"
