bash .llvm22/unpack.sh >/dev/null 2>&1
cd .dev/hskb/src || exit 1
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name --format=csv,noheader
for i in 0 1 2 3; do
  timeout 60 python3 benchmarks/cuda_waves.py ../spec2_$i.json $OUT/waves2_$i.json --rounds 3 2>&1 | grep -v Warning | tee -a $OUT/waves2.txt | tail -12
done
