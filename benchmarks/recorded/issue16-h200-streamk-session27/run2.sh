set -x
bash .llvm22/unpack.sh >/dev/null 2>&1
cd .dev/hsk/src || exit 1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site
timeout 62 python3 benchmarks/cuda_waves.py ../spec2.json $OUT/waves2.json --rounds 3 --budget 45 2>&1 | tee $OUT/waves2.txt | grep -v "^    "
grep "^    " $OUT/waves2.txt | sort | uniq | head -40
