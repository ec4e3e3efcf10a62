"""Packing A for f32 / f64 (session 36): a packed panel holds each K step as an mr x kb block of rows
(as the AMX panels do), so the packing copies rows (vector loads and stores) where it transposed
them (the panel's columns, mr elements each: 124 scalar stores in a 200^3 f32 kernel, 1.0-1.5 cycles
an element); the checked steps (a panel past M, the K tail) load each row with one masked vector
load instead of selecting each element's address. The code (cross-compiled, so every CPU's form
is checked here) and the products against NumPy in float64: edge panels of every size, K tails,
row tiles from 5 to 16 rows, strided A, 1 and 2 workers; A and B unmodified."""
import re

import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close


def _code(m, n, k, dtype, cpu, plan=None):
    a = np.zeros((m, k), dtype)
    b = np.zeros((k, n), dtype)
    return coopjit.cross_compile(a, b, cpu=cpu, plan=plan or {"pack": 1}, threads=2)


@pytest.mark.parametrize("cpu", ["emeraldrapids", "znver4", "znver5", "haswell"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(200, 200, 200), (300, 200, 100), (513, 129, 700)])
def test_packing_a_stores_no_scalars(cpu, dtype, m, n, k):
    out = _code(m, n, k, dtype, cpu)
    assert out["config"]["pack"] is True and out["config"]["vnni"] == 1
    # Scalar stores to memory (vmovss / vmovsd / vextractps to an address): the old panel layout's
    # transposing copy (a 200^3 f32 kernel: 124 of them; f64: 185). The tiles keep none either.
    scalar_stores = re.findall(r"\b(?:vmovss|vmovsd|vextractps)\s+[^,]+,\s*-?\w*\(", out["asm"])
    assert len(scalar_stores) <= 2, (cpu, dtype, scalar_stores[:8])
    # The checked steps (M not a multiple of mr, or K not of kb) load rows as masked vectors.
    width = 32 if dtype == np.float32 else 64
    mr, kb = out["config"]["mr"], out["config"]["kb"]
    if m % mr or k % kb:
        assert re.search(rf"llvm\.masked\.load\.v{kb}f{width}", out["llvm"]), (cpu, mr, kb)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(1, 40, 9), (7, 33, 5), (13, 64, 4), (29, 48, 131), (97, 97, 97), (200, 200, 200),
                                   (300, 200, 100), (130, 70, 1)])
@pytest.mark.parametrize("tile", [None, (5, 32), (6, 32), (12, 16), (16, 16)])
@pytest.mark.parametrize("threads", [1, 2])
def test_packed_products_against_float64(dtype, m, n, k, tile, threads):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    a0, b0 = a.copy(), b.copy()
    plan = {"pack": 1, "threads": threads}
    if tile:
        plan["mr"], plan["nr"] = tile
    c = coopjit.matmul(a, b, plan=plan)
    c2 = np.full((m, n), np.nan, dtype)
    coopjit.matmul(a, b, out=c2, plan=dict(plan, inline_b=1))
    assert_gemm_close(c, a, b)
    assert_gemm_close(c2, a, b)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("layout", ["strided", "colmajor", "offset"])
def test_packed_a_of_other_layouts(layout):
    # A whose rows are not unit-stride (strided, column-major) takes the element-wise checked
    # loads; a view into a larger array (offset) the row loads, masked at the edges of the view
    # only (the elements past it in the parent are never read into the product).
    rng = np.random.default_rng(7)
    m, n, k = 101, 67, 43
    big = rng.standard_normal((m + 3, 2 * k + 5)).astype(np.float32)
    if layout == "strided":
        a = big[:m, : 2 * k : 2]
    elif layout == "colmajor":
        a = np.asfortranarray(big[:m, :k])
    else:
        big[:, k + 1 :] = np.nan  # a wrong read past the view's K shows as NaN
        big[m + 1 :, :] = np.nan
        a = big[1 : m + 1, 1 : k + 1]
    b = rng.standard_normal((k, n)).astype(np.float32)
    for threads in (1, 2):
        c = coopjit.matmul(a, b, plan={"pack": 1, "threads": threads})
        assert_gemm_close(c, np.ascontiguousarray(a), b)
