#!/usr/bin/env bash
# Session 29, warm machine: which tests failed in the first run (4 F at 64%, cut by the cap), -v.
set -u
REPO=$(pwd)
t0=$(date +%s)
if [ ! -d /tmp/site/coopjit ]; then bash .llvm22/unpack.sh > /dev/null && python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site -Cbuild-dir=/tmp/cb . 2>&1 | tail -3; fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd /tmp
COOPJIT_TEST_DEVICE=cuda:0 timeout ${GPU_T:-150} python3 -m pytest -p no:cacheprovider -n 16 -v -rfE --timeout=90 --timeout-method=thread -p no:benchmark --maxfail=${MAXFAIL:-6} \
  $(for t in ${FILES}; do echo $REPO/$t; done) > $OUT/tests2.log 2>&1
echo "pytest rc $? at $(( $(date +%s) - t0 )) s"
pkill -f "python3 -m pytest"; pkill -f "execnet|xdist"
grep -E "FAILED|ERROR" $OUT/tests2.log | head -20
grep -E "passed|failed" $OUT/tests2.log | tail -2
awk '/= FAILURES =/{p=1} p' $OUT/tests2.log | head -80
