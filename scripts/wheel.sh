#!/usr/bin/env bash
# `make wheel`: a self-contained wheel. The LLVM components coopjit uses are linked statically
# into _core (COOPJIT_STATIC_LLVM=ON), hidden behind _core's version script (it exports
# PyInit__core alone), so the module needs no libLLVM; auditwheel then grafts the remaining
# non-system libraries and gives the wheel its manylinux tag. Then the wheel is installed into a
# fresh virtual environment (its dependencies from PyPI) and the kernel tests run from the
# installed package, checking that no libLLVM was loaded (tests/test_installed_wheel.py).
# The wheel lands in dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/setup.sh   # the packages: LLVM 22's static libraries, auditwheel, patchelf

ROOT=${COOPJIT_WHEEL_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/coopjit/wheel}/$(pwd -P | sha256sum | cut -c1-12)
mkdir -p "$ROOT" dist
rm -rf "$ROOT/raw" && mkdir -p "$ROOT/raw"
# COOPJIT_CMAKE_ARGS as setup.sh's build takes them (CI: -DCOOPJIT_WERROR=ON): the same compile
# flags, so that ccache gives this build the objects of `make test`'s and only the link is new.
echo "wheel: building with LLVM linked statically"
t0=$(date +%s)
$PY -m pip wheel -q --no-build-isolation --no-deps -w "$ROOT/raw" -Cbuild-dir="$ROOT/build/{wheel_tag}" \
    -Ccmake.args="-DCOOPJIT_STATIC_LLVM=ON${COOPJIT_CMAKE_ARGS:+;$COOPJIT_CMAKE_ARGS}" .
raw=$(ls "$ROOT"/raw/coopjit-*.whl)
echo "wheel: built in $(( $(date +%s) - t0 )) s: $(basename "$raw")"
rm -f dist/coopjit-*.whl
$PY -m auditwheel repair -w dist "$raw"
whl=$(ls dist/coopjit-*manylinux*.whl)
echo "wheel: $(basename "$whl"), $(du -h "$whl" | cut -f1)"
$PY -m auditwheel show "$whl"

echo "wheel: a fresh venv, the wheel and pytest"
rm -rf "$ROOT/venv"
$PY -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install -q --upgrade pip
"$ROOT/venv/bin/python" -m pip install -q "$whl" pytest
work=$(mktemp -d)
cp -r tests "$work/tests"
cd "$work"   # away from the checkout: the installed package is the one imported
COOPJIT_EXPECT_INSTALLED_WHEEL=1 "$ROOT/venv/bin/python" -m pytest -q -p no:cacheprovider \
    tests/test_installed_wheel.py tests/test_gemm_correctness.py tests/test_reduce.py tests/test_ir_ops.py tests/test_prepack.py
rm -rf "$work"
