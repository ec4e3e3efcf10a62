# test_workers ARGS...: the pytest-xdist option that spreads the tests over this machine's cores
# (one worker a core, at most 4: each test's own thread pool uses the cores too), or nothing when
# pytest-xdist is missing, the machine has one core, COOPJIT_TEST_WORKERS=0, or ARGS already name
# a worker count (-n N) or turn xdist off (-p no:xdist). COOPJIT_TEST_WORKERS=N asks for N.
test_workers() {
  local a
  for a in "$@"; do
    case "$a" in -n|-n[0-9]*|--numprocesses*|no:xdist) return 0 ;; esac
  done
  ${PY:-python3} -c "import xdist" 2>/dev/null || return 0
  local n=${COOPJIT_TEST_WORKERS:-$(nproc 2>/dev/null || echo 1)}
  [ "$n" -gt 4 ] && [ -z "${COOPJIT_TEST_WORKERS:-}" ] && n=4
  [ "$n" -gt 1 ] && echo "-n $n"
  return 0
}
