set -e
bash .llvm22/unpack.sh > /dev/null
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | grep -v WARNING | tail -3
export PYTHONPATH=/tmp/site
R=$PWD
cd /tmp
timeout 170 python3 -m coopjit bench --device cuda:0 --out $OUT/bench > $OUT/bench.txt 2>&1 || echo "rc $?" >> $OUT/bench.txt
cat $OUT/bench.txt | tail -30
timeout 280 python3 -m pytest -q -p no:cacheprovider $R/tests/test_epi_alias_s38.py $R/tests/test_wide_edge_s37.py $R/tests/test_hopper_wide_tile_s27.py $R/tests/test_skdp_cost_s37.py $R/tests/test_cuda_streamk_pair.py $R/tests/test_gpu_ntile.py $R/tests/test_gpu_orient.py $R/tests/test_sk_few_waves_s28.py $R/tests/test_tile_bands_s29.py $R/tests/test_tma_store.py > $OUT/tests4.txt 2>&1 || echo "rc $?" >> $OUT/tests4.txt
tail -6 $OUT/tests4.txt
