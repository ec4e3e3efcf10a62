# hsq (session 29) device run 2: branch s29-hsq (rule kTileBands) against main's plan (group_m 0 named:
# main's PTX) and cuBLAS, then the new device tests. run: carry [".llvm22", ".dev/hsq"]; command: bash .dev/hsq/run2.sh
bash .llvm22/unpack.sh >/dev/null 2>&1
H=$(pwd)/.dev/hsq; cd $H/src || exit 1; SRC=$(pwd)
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb -Ccmake.define.COOPJIT_WERROR=ON . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 45 python3 benchmarks/cuda_waves.py $H/spec2.json $OUT/waves2.json --rounds 3 --budget 28 2>&1 | tee $OUT/waves2.txt
echo "waves done $(( $(date +%s) - t0 )) s"
cd /tmp
COOPJIT_TEST_DEVICE=cuda:0 timeout 25 python3 -m pytest -q -p no:cacheprovider -n 4 $SRC/tests/test_tile_bands_s29.py > $OUT/tests2.txt 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/tests2.txt
