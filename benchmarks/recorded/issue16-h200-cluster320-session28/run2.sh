# Device run 2 (session 28, hsk): build the branch, device tests of the SK + DP rule (and test_gpu_ntile, whose expectation moved), cuda_waves timings.
# run: carry [".llvm22", ".dev/hsk"]; command: bash .dev/hsk/src/benchmarks/recorded/issue16-h200-cluster320-session28/run2.sh
R=benchmarks/recorded/issue16-h200-cluster320-session28
bash .llvm22/unpack.sh >/dev/null 2>&1
cd .dev/hsk/src || exit 1
SRC=$(pwd)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb -Ccmake.define.COOPJIT_WERROR=ON . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site
cd /tmp
COOPJIT_TEST_DEVICE=cuda:0 timeout 75 python3 -m pytest -q -p no:cacheprovider -n 16 --timeout=60 $SRC/tests/test_sk_few_waves_s28.py $SRC/tests/test_gpu_ntile.py > $OUT/tests2.txt 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -4 $OUT/tests2.txt; grep -E "^(FAILED|ERROR)" $OUT/tests2.txt | head -20
cd $SRC
timeout 150 python3 benchmarks/cuda_waves.py $R/spec2.json $OUT/waves2.json --rounds 5 --budget 110 2>&1 | tee $OUT/waves2.txt | grep -v "^    "
grep "^    " $OUT/waves2.txt | sort | uniq | head -40
echo "total $(( $(date +%s) - t0 )) s"
