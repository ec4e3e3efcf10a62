#!/usr/bin/env bash
# `make sanitize`: builds coopjit with clang-22 under AddressSanitizer and UndefinedBehaviorSanitizer
# (-Werror too: the second compiler's build) into its own directory, then runs the part of the
# test suite that reaches every C++ module with the sanitizer runtime preloaded into Python.
# Any report fails the run (halt_on_error); no report is suppressed. Leak checking is off:
# LeakSanitizer stops the process with ptrace to scan it, which this machine's sandbox (and CI's)
# refuses ("ptrace appears to be blocked"), and CPython frees little at exit anyway.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
source scripts/test_workers.sh
bash scripts/setup.sh || exit 1   # the packages (clang-22, its sanitizer runtimes, pytest, ...)

ROOT=${COOPJIT_SANITIZE_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/coopjit/sanitize}/$(pwd -P | sha256sum | cut -c1-12)
SITE="$ROOT/site"
mkdir -p "$ROOT"
stamp=$( (find cpp python cmake -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | sort; echo CMakeLists.txt pyproject.toml) \
         | xargs sha256sum | sha256sum | cut -d' ' -f1)
if [ "$(cat "$ROOT/.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -d "$SITE/coopjit" ]; then
  echo "sanitize: building coopjit with clang-22, -fsanitize=address,undefined"
  rm -rf "$SITE"
  CC=clang-22 CXX=clang++-22 $PY -m pip install -q --no-build-isolation --no-deps --target "$SITE" \
      -Cbuild-dir="$ROOT/build/{wheel_tag}" -Ccmake.build-type=RelWithDebInfo \
      -Ccmake.args="-DCOOPJIT_SANITIZE=address,undefined;-DCOOPJIT_WERROR=ON" . || exit 1
  echo "$stamp" > "$ROOT/.stamp"
fi

ASAN_RT=$(clang++-22 -print-file-name=libclang_rt.asan-x86_64.so)
[ -e "$ASAN_RT" ] || { echo "sanitize: no $ASAN_RT (apt-get install libclang-rt-22-dev)"; exit 1; }
PYBIN=$($PY -c "import sys; print(sys.executable)")  # not a shell shim: the preload reaches every child
# The tests that reach every C++ module: IR / builder / verifier / printer (test_ir_ops,
# test_kernel_api), the layout (test_layout), tensor addressing (test_tensor_addressing), the
# GEMM and reduction planners, recipes, SIMD lowering, JIT, pool and kernel caches
# (test_gemm_correctness, test_gemm_errors, test_gemm_lowp, test_gemm_splits, test_reduce, test_reduce_shapes,
# test_prepack, test_gemm_skinny: the dot and k_outer walks, the worker grid; test_gemm_shares: the
# blocked nest in shares, ThreadPool::run_shares), the disk cache
# (test_cache), the SIMT lowering and SPIR-V target and device runtimes (test_spirv,
# test_simt_ops, test_simt_workgroup), the fused epilogues and the CPU's launch grid (test_epilogue, test_kernel_grid), the operation
# probes and their support by target, SIMT and CPU accumulates of every type (test_conformance_table,
# test_accumulate_types), groupshared arrays (test_groupshared), decode functions written in Python and
# the SNorm / UNorm lowering (test_tensor_decode, test_norm_types), the C++ unit tests (test_cpp_units) and the
# K = 0 plans and epilogue operands in the output that session 20's audit found (test_plan_edges).
TESTS=${SANITIZE_TESTS:-"tests/test_ir_ops.py tests/test_kernel_api.py tests/test_layout.py tests/test_tensor_addressing.py \
tests/test_gemm_correctness.py tests/test_gemm_errors.py tests/test_gemm_lowp.py tests/test_gemm_splits.py \
tests/test_reduce.py tests/test_reduce_shapes.py tests/test_prepack.py tests/test_cache.py tests/test_spirv.py tests/test_simt_ops.py tests/test_cpp_units.py \
tests/test_gemm_skinny.py tests/test_gemm_inline_b.py tests/test_gemm_shares.py tests/test_epilogue.py tests/test_kernel_grid.py tests/test_conformance_table.py \
tests/test_accumulate_types.py tests/test_simt_workgroup.py tests/test_groupshared.py tests/test_tensor_decode.py tests/test_norm_types.py \
tests/test_plan_edges.py"}
# Every test function of these files runs, on a third of its parametrized cases (the first and
# every third: tests/conftest.py, COOPJIT_TEST_SAMPLE; `make test` runs them all uninstrumented):
# the sanitizers look at the code paths, which the cases share, at a third of the time.
SAMPLE=${COOPJIT_TEST_SAMPLE:-3}
echo "sanitize: running $TESTS (parametrized cases: 1 in $SAMPLE)"
# Reports go to files as well as stderr: a report ends the process, and pytest would lose what
# it had captured of the failing test's stderr.
REPORTS="$ROOT/reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
env PYTHONPATH="$SITE" LD_PRELOAD="$ASAN_RT" PYTHONMALLOC=malloc COOPJIT_TEST_SAMPLE="$SAMPLE" \
    ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=86:log_path=$REPORTS/asan" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=87:log_path=$REPORTS/ubsan" \
    "$PYBIN" -m pytest $TESTS -q -p no:cacheprovider $(test_workers "$@") "$@"
rc=$?
if ls "$REPORTS"/* >/dev/null 2>&1; then
  echo "sanitize: sanitizer reports:"; cat "$REPORTS"/*
  [ $rc -eq 0 ] && rc=1
fi
if [ $rc -eq 5 ]; then echo "sanitize: pytest collected no tests: failing"; exit 1; fi
[ $rc -eq 86 ] && echo "sanitize: AddressSanitizer reported an error (above)"
[ $rc -eq 87 ] && echo "sanitize: UndefinedBehaviorSanitizer reported an error (above)"
exit $rc
