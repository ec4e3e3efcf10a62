set -e
bash .llvm22/unpack.sh > /dev/null
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | grep -v WARNING | tail -3
export PYTHONPATH=/tmp/site
R=$PWD
cd /tmp
timeout 150 python3 -m coopjit bench --device cuda:0 --out $OUT/bench > $OUT/bench.txt 2>&1 || echo "rc $?" >> $OUT/bench.txt
cat $OUT/bench.txt | tail -25
timeout 300 python3 -m pytest -q -p no:cacheprovider $R/tests/test_skdp_cost_s37.py $R/tests/test_wide_edge_s37.py $R/tests/test_bench.py $R/tests/test_gpu_stream_k.py $R/tests/test_tile_bands_s29.py $R/tests/test_hopper_wide_tile_s27.py $R/tests/test_ptx.py $R/tests/test_gpu_orient.py > $OUT/tests5.txt 2>&1 || echo "rc $?" >> $OUT/tests5.txt
tail -4 $OUT/tests5.txt
