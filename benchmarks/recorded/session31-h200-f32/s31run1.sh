#!/usr/bin/env bash
# Session 31 (helper, issue 16), run 1: the register-staged K-contiguous f32 panel (src: s31-gf32)
# against main (base) in the same run: both trees built side by side, ptxas registers, the f32
# timing scripts alternating base / new processes (cuBLAS in each), then the tests and f32check.py.
set -u
REPO=$(pwd)
D=$REPO/.dev/gf32
S=$D/src/benchmarks/recorded/session31-h200-f32
bash .llvm22/unpack.sh > /dev/null || exit 1
t0=$(date +%s)
(cd $D/src && python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . > /tmp/b1.log 2>&1; echo "new build rc $?") &
(cd $D/base && python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site0 -Cbuild-dir=/tmp/cb0 . > /tmp/b0.log 2>&1; echo "base build rc $?") &
wait; tail -5 /tmp/b1.log /tmp/b0.log
echo "builds at $(( $(date +%s) - t0 )) s"
cd /tmp
export PYTHONPATH_NEW=/tmp/site:$D/src/benchmarks PYTHONPATH_BASE=/tmp/site0:$D/src/benchmarks
for v in BASE NEW; do eval "export PYTHONPATH=\$PYTHONPATH_$v"; echo "== $v ptxas"; python3 $S/f32regs.py; done
for r in 1 2; do for v in BASE NEW; do
  eval "export PYTHONPATH=\$PYTHONPATH_$v"
  echo "== $v f32plans round $r"; ONLY=auto,cublas timeout 60 python3 $S/f32plans.py 2048x2048x2048,4096x4096x4096,1000x4096x4096 3 2>&1 | grep -v "^$"
done; done
for v in BASE NEW; do eval "export PYTHONPATH=\$PYTHONPATH_$v"; echo "== $v f32trans"; timeout 50 python3 $S/f32trans.py 4096 2>&1; done
for v in BASE NEW; do eval "export PYTHONPATH=\$PYTHONPATH_$v"; echo "== $v 8192"; ONLY=auto,cublas timeout 40 python3 $S/f32plans.py 8192x8192x8192 3 2>&1 | grep -v "^$"; done
echo "timings done at $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PYTHONPATH_NEW
COOPJIT_TEST_DEVICE=cuda:0 timeout 100 python3 -m pytest -p no:cacheprovider -n 16 -q -p no:benchmark $D/src/tests/test_cuda_f32_fma_s30.py $D/src/tests/test_cuda.py -k "f32_fma or transposes or matmul or strided or batch or gemm or fma" > $OUT/tests.log 2>&1
echo "tests rc $? at $(( $(date +%s) - t0 )) s"; grep -E "^(FAILED|ERROR)| passed| failed" $OUT/tests.log | tail -15
timeout ${CHK_T:-90} python3 $S/f32check.py 2>&1 | tail -8
echo "done in $(( $(date +%s) - t0 )) s"
