# Device run 1 (session 28, hsk): build the branch, device tests of the cluster code, cuda_waves timings.
# run: carry [".llvm22", ".dev/hsk"]; command: bash .dev/hsk/src/benchmarks/recorded/issue16-h200-cluster320-session28/run1.sh
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
COOPJIT_TEST_DEVICE=cuda:0 timeout 75 python3 -m pytest -q -p no:cacheprovider -n 16 --timeout=60 $SRC/tests/test_hopper_cluster320_s28.py $SRC/tests/test_gpu_cluster.py > $OUT/tests1.txt 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -4 $OUT/tests1.txt; grep -E "^(FAILED|ERROR)" $OUT/tests1.txt | head -20
cd $SRC
timeout 150 python3 benchmarks/cuda_waves.py $R/spec1.json $OUT/waves1.json --rounds 3 --budget 120 2>&1 | tee $OUT/waves1.txt | grep -v "^    "
grep "^    " $OUT/waves1.txt | sort | uniq | head -40
echo "total $(( $(date +%s) - t0 )) s"
