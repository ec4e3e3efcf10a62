set -e
bash .llvm22/unpack.sh > /dev/null
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | grep -v WARNING | tail -3
export PYTHONPATH=/tmp/site
R=$PWD
cd /tmp
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
timeout 300 python3 $R/benchmarks/cuda_waves.py $R/benchmarks/recorded/issue16-h200-edge320-session37/spec3.json $OUT/waves3.json --rounds 3 --budget 240 > $OUT/waves3.txt 2>&1 || echo "rc $?" >> $OUT/waves3.txt
grep -v "^    " $OUT/waves3.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -x $R/tests/test_wide_edge_s37.py $R/tests/test_gpu_orient.py $R/tests/test_gpu_ntile.py $R/tests/test_cuda_streamk_pair.py > $OUT/tests3.txt 2>&1 || echo "rc $?" >> $OUT/tests3.txt
tail -5 $OUT/tests3.txt
