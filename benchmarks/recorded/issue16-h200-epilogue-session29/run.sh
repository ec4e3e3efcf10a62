set -u
cd "$(dirname "$0")"; D=$PWD
( cd src && python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site-new -Cbuild-dir=/tmp/cb-new . > /tmp/b-new.log 2>&1; echo new-built $? ) &
( cd base && python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site-main -Cbuild-dir=/tmp/cb-main . > /tmp/b-main.log 2>&1; echo main-built $? ) &
wait; tail -3 /tmp/b-new.log /tmp/b-main.log
cd /tmp
CHECK=1 PYTHONPATH=/tmp/site-new timeout 120 python3 $D/epi_ab.py new $OUT/new1.json 2>&1 | grep -v Warning
PYTHONPATH=/tmp/site-main timeout 80 python3 $D/epi_ab.py main $OUT/main1.json 2>&1 | grep -v Warning
PYTHONPATH=/tmp/site-new timeout 80 python3 $D/epi_ab.py new $OUT/new2.json 2>&1 | grep -v Warning
PYTHONPATH=/tmp/site-main timeout 80 python3 $D/epi_ab.py main $OUT/main2.json 2>&1 | grep -v Warning
