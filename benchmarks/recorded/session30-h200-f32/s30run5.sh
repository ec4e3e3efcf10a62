#!/usr/bin/env bash
# Session 30, lead run 5: K-contiguous f32 A copied transposed too (a @ b.T): tests, the four transpose forms' timing.
set -u
REPO=$(pwd)
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb -Ccmake.define.COOPJIT_WERROR=ON . 2>&1 | tail -30
echo "build: rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site
cd /tmp
COOPJIT_TEST_DEVICE=cuda:0 timeout 75 python3 -m pytest -p no:cacheprovider -n 16 -q -p no:benchmark $REPO/tests/test_cuda_f32_fma_s30.py $REPO/tests/test_cuda.py -k "f32_fma or transposes or matmul or strided or batch or gemm" 2>&1 | grep -E "passed|failed|FAILED|Error" | tail -8
echo "tests at $(( $(date +%s) - t0 )) s"
timeout 45 python3 $REPO/.dev/lead/f32trans.py 4096 2>&1 | tee $OUT/f32trans.txt
echo "done in $(( $(date +%s) - t0 )) s"
