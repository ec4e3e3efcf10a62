#!/usr/bin/env bash
# Runs the whole test suite (after setup). pytest's exit code 5 (no test collected) is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/setup.sh || exit 1
source scripts/test_workers.sh
$PY -m pytest tests $(test_workers "$@") "$@"
rc=$?
if [ $rc -eq 5 ]; then echo "test.sh: pytest collected no tests: failing"; exit 1; fi
exit $rc
