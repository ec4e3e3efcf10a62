#!/usr/bin/env bash
# Session 28's second run on the warm machine: this session's new test files only (the first
# run's 160 s cap stopped the 18 files at 68%, no failure).
set -u
REPO=$(pwd)
t0=$(date +%s)
if [ ! -d /tmp/site/coopjit ]; then
  bash .llvm22/unpack.sh > /dev/null || exit 1
  python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | tail -5
fi
export PYTHONPATH=/tmp/site
cd /tmp
COOPJIT_TEST_DEVICE=cuda:0 timeout ${GPU_T:-170} python3 -m pytest -p no:cacheprovider -n 16 -q -rfE --timeout=90 --timeout-method=thread -p no:benchmark \
  $REPO/tests/test_hopper_cluster320_s28.py $REPO/tests/test_sk_few_waves_s28.py $REPO/tests/test_amx_nest_s28.py \
  $REPO/tests/test_audit_s28.py $REPO/tests/test_small_int8_pack_s28.py $REPO/tests/test_column_rows_s28.py \
  $REPO/tests/test_emr16_rows_s28.py $REPO/tests/test_reduce_columns_s28.py > $OUT/new-tests.log 2>&1
echo "pytest rc $? at $(( $(date +%s) - t0 )) s"
pkill -f "python3 -m pytest"; pkill -f "execnet|xdist"
grep -E "^(FAILED|ERROR)| passed| failed|Timeout" $OUT/new-tests.log | tail -30
