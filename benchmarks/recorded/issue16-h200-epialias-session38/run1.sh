set -e
bash .llvm22/unpack.sh > /dev/null
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | grep -v WARNING | tail -3
export PYTHONPATH=/tmp/site
R=$PWD
cd /tmp
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
timeout 320 python3 $R/benchmarks/cuda_waves.py $R/benchmarks/recorded/issue16-h200-epialias-session38/spec1.json $OUT/waves1.json --rounds 3 --budget 280 > $OUT/waves1.txt 2>&1 || echo "rc $?" >> $OUT/waves1.txt
grep -v "^    " $OUT/waves1.txt
