#!/usr/bin/env bash
# Session 31, lead run 3: the merged main (register-staged f32 panel, 3 stages for a @ b): device tests, the four transpose forms, the GPU bench (quick).
set -u
REPO=$(pwd)
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb -Ccmake.define.COOPJIT_WERROR=ON . 2>&1 | tail -30
echo "build: rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site
cd /tmp
COOPJIT_TEST_DEVICE=cuda:0 timeout 200 python3 -m pytest -p no:cacheprovider -n 16 -q -p no:benchmark $REPO/tests/test_cuda.py $REPO/tests/test_cuda_f32_fma_s30.py $REPO/tests/test_cuda_scaled_s30.py 2>&1 | tee $OUT/tests.txt | grep -E "passed|failed|FAILED|Error" | tail -8
echo "tests at $(( $(date +%s) - t0 )) s"
timeout 60 python3 $REPO/.dev/lead/f32trans.py 4096 2>&1 | tee $OUT/f32trans.txt | tail -8
echo "f32trans at $(( $(date +%s) - t0 )) s"
timeout 150 python3 -m coopjit bench --device cuda:0 --quick --out $OUT/bench 2>&1 | tee $OUT/bench.txt | tail -30
echo "done in $(( $(date +%s) - t0 )) s"
