#!/usr/bin/env bash
# Session 31 (helper, issue 16), run 4: the final tree (register-staged panel, 3 stages where an
# operand is K-contiguous): device tests, the planner's plan against 4 / 2 stages and cuBLAS, the
# four transpose forms.
set -u
REPO=$(pwd)
D=$REPO/.dev/gf32
S=$D/src/benchmarks/recorded/session31-h200-f32
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
(cd $D/src && python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . > /tmp/b1.log 2>&1; echo "build rc $?")
cd /tmp
export PYTHONPATH=/tmp/site:$D/src/benchmarks
COOPJIT_TEST_DEVICE=cuda:0 timeout 80 python3 -m pytest -p no:cacheprovider -n 16 -q -p no:benchmark $D/src/tests/test_cuda_f32_fma_s30.py $D/src/tests/test_cuda.py -k "f32_fma or transposes or matmul or strided or batch or gemm or fma" > $OUT/tests.log 2>&1
echo "tests rc $? at $(( $(date +%s) - t0 )) s"; grep -E "^(FAILED|ERROR)| passed| failed" $OUT/tests.log | tail -15
ONLY=auto,cublas,st4,st2 timeout 60 python3 $S/f32plans.py 4096x4096x4096,2048x2048x2048 3 2>&1 | grep -v "^$"
timeout 40 python3 $S/f32trans.py 4096 2>&1
echo "done in $(( $(date +%s) - t0 )) s"
