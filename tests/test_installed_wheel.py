"""The self-contained wheel (`make wheel`): run from the wheel installed into a fresh virtual
environment, coopjit's kernels work without libLLVM. Runs only where scripts/wheel.sh sets
COOPJIT_EXPECT_INSTALLED_WHEEL=1; in the normal suite (a development build that links the
shared libLLVM) it skips, saying so."""
import os
import sys

import numpy as np
import pytest

import coopjit

pytestmark = pytest.mark.skipif(
    os.environ.get("COOPJIT_EXPECT_INSTALLED_WHEEL") != "1",
    reason="checks the wheel of `make wheel` installed in a fresh venv (scripts/wheel.sh runs it)")


def _mapped_libraries():
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if len(line.split()) >= 6 and ".so" in line.split()[-1]}


def test_imported_from_the_venv():
    assert coopjit.__file__.startswith(sys.prefix), (coopjit.__file__, sys.prefix)


def test_kernels_run_without_libllvm():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((70, 90)).astype(np.float32)
    b = rng.standard_normal((90, 50)).astype(np.float32)
    c = coopjit.matmul(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(c - ref).max() <= 1e-4 * np.abs(a).max() * np.abs(b).max() * 90
    s = coopjit.reduce(a, axis=0)
    assert np.allclose(s, a.astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-4)
    llvm = sorted(p for p in _mapped_libraries() if "libLLVM" in os.path.basename(p))
    assert not llvm, f"libLLVM was loaded: {llvm}"
    core = [p for p in _mapped_libraries() if os.path.basename(p).startswith("_core")]
    assert core and all(p.startswith(sys.prefix) for p in core), core
