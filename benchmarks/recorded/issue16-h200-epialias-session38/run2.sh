set -e
bash .llvm22/unpack.sh > /dev/null
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | grep -v WARNING | tail -3
export PYTHONPATH=/tmp/site
R=$PWD
cd /tmp
timeout 330 python3 $R/benchmarks/cuda_waves.py $R/benchmarks/recorded/issue16-h200-epialias-session38/spec2.json $OUT/waves2.json --rounds 3 --budget 300 > $OUT/waves2.txt 2>&1 || echo "rc $?" >> $OUT/waves2.txt
grep -v "^    " $OUT/waves2.txt | tail -45
timeout 150 python3 -m pytest -q -p no:cacheprovider $R/tests/test_wide_edge_s37.py $R/tests/test_hopper_wide_tile_s27.py -k "not assemble and not planner" > $OUT/tests2.txt 2>&1 || echo "rc $?" >> $OUT/tests2.txt
tail -8 $OUT/tests2.txt
