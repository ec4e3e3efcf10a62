#!/usr/bin/env bash
# Runs the whole test suite (after setup). pytest's exit code 5 (no test collected) is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/setup.sh || exit 1
source scripts/test_workers.sh
# (--durations: the slowest tests at the end of the log, to see what a new kind of machine costs)
$PY -m pytest tests --durations=25 $(test_workers "$@") "$@"
rc=$?
if [ $rc -eq 5 ]; then echo "test.sh: pytest collected no tests: failing"; exit 1; fi
exit $rc
