set -e
bash .llvm22/unpack.sh > /dev/null
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | grep -v WARNING | tail -3
export PYTHONPATH=/tmp/site
R=$PWD
cd /tmp
timeout 120 python3 $R/benchmarks/recorded/issue16-h200-epialias-session38/trans5.py $OUT/trans5.json > $OUT/trans5.txt 2>&1 || echo "rc $?" >> $OUT/trans5.txt
cat $OUT/trans5.txt
