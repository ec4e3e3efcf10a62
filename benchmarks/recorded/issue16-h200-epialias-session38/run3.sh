set -e
bash .llvm22/unpack.sh > /dev/null
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | grep -v WARNING | tail -3
export PYTHONPATH=/tmp/site
R=$PWD
cd /tmp
timeout 120 python3 -m pytest -q -p no:cacheprovider $R/tests/test_epi_alias_s38.py > $OUT/tests3.txt 2>&1 || echo "rc $?" >> $OUT/tests3.txt
tail -4 $OUT/tests3.txt
timeout 290 python3 $R/benchmarks/cuda_waves.py $R/benchmarks/recorded/issue16-h200-epialias-session38/spec3.json $OUT/waves3.json --rounds 3 --budget 260 > $OUT/waves3.txt 2>&1 || echo "rc $?" >> $OUT/waves3.txt
grep -v "^    " $OUT/waves3.txt | tail -55
