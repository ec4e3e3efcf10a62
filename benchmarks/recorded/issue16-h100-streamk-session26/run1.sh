set -x
bash .llvm22/unpack.sh >/dev/null 2>&1
cd .dev/hskb/src || exit 1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
S=../
timeout 60 python3 $S/cublas_kernels_s26.py $OUT/cublas_kernels.txt 2816x1920x8192 1024x4864x8192 4352x1024x8192 4608x1024x8192 5632x1152x8192 4864x896x8192 8192x8192x8192 5632x5632x8192 4864x3072x8192 2>&1 | grep -v Warning | tail -20
timeout 330 python3 benchmarks/cuda_waves.py $S/spec.json $OUT/waves.json --rounds 3 --budget 280 2>&1 | tee $OUT/waves.txt | grep -v "^    "
grep "^    " $OUT/waves.txt | sort | uniq | head -40
