set -x
bash .llvm22/unpack.sh >/dev/null 2>&1
cd .dev/hsk/src || exit 1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
SRC=$PWD; (cd /tmp && timeout 100 python3 -m pytest -q -p no:cacheprovider -n 12 --maxfail=6 $SRC/tests/test_hopper_wide_tile_s27.py $SRC/tests/test_hopper_plan_registers_s26.py 2>&1) | tail -25 | tee $OUT/tests.txt
timeout 30 python3 benchmarks/cublas_kernels_s26.py $OUT/cublas_kernels.txt 2816x1920x8192 1024x4864x8192 5632x5632x8192 4864x3072x8192 4352x1024x8192 2>&1 | grep -v Warning | tail -8
timeout 125 python3 benchmarks/cuda_waves.py ../spec1.json $OUT/waves.json --rounds 3 --budget 95 2>&1 | tee $OUT/waves.txt | grep -v "^    "
grep "^    " $OUT/waves.txt | sort | uniq | head -40
