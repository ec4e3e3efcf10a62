set -e
bash .llvm22/unpack.sh > /dev/null
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | grep -v WARNING | tail -3
export PYTHONPATH=/tmp/site
R=$PWD
cd /tmp
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
timeout 300 python3 $R/benchmarks/cuda_waves.py $R/benchmarks/recorded/issue16-h200-edge320-session37/spec4.json $OUT/waves4.json --rounds 3 --budget 200 > $OUT/waves4.txt 2>&1 || echo "rc $?" >> $OUT/waves4.txt
grep -v "^    " $OUT/waves4.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -x $R/tests/test_gpu_orient.py $R/tests/test_gpu_ntile.py $R/tests/test_gpu_stream_k.py > $OUT/tests4.txt 2>&1 || echo "rc $?" >> $OUT/tests4.txt
tail -5 $OUT/tests4.txt
