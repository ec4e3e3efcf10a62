"""Packing A for f32 / f64 (session 36): a row-major A's packed panel holds each K step as an mr x kb
block of rows (as the AMX panels do), so the packing copies rows (vector loads and stores) where it
transposed them (the panel's columns, mr elements each: 124 scalar stores in a 200^3 f32 kernel,
1.0-1.5 cycles an element); the checked steps (a panel past M, the K tail) load each row with one
masked vector load instead of selecting each element's address. A column-major A keeps the
panel's columns and, where its column stride is 1 at run time, copies each column with one vector
load and store (183 scalar stores before). The code (cross-compiled, so every CPU's form
is checked here) and the products against NumPy in float64: edge panels of every size, K tails,
row tiles from 5 to 16 rows, strided A, 1 and 2 workers; A and B unmodified."""
import re

import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close, fit_tile


def _code(m, n, k, dtype, cpu, plan=None, order="C"):
    a = np.zeros((m, k), dtype, order=order)
    b = np.zeros((k, n), dtype)
    return coopjit.cross_compile(a, b, cpu=cpu, plan=plan or {"pack": 1}, threads=2)


# (AVX2 f64 with a column-major A keeps 16 scalar stores, not looked into: not in the F list)
_CPU_ORDERS = [(cpu, "C") for cpu in ("emeraldrapids", "znver4", "znver5", "haswell")] + \
              [(cpu, "F") for cpu in ("emeraldrapids", "znver4", "znver5")]


@pytest.mark.parametrize("cpu,order", _CPU_ORDERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(200, 200, 200), (300, 200, 100), (513, 129, 700)])
def test_packing_a_stores_no_scalars(cpu, dtype, m, n, k, order):
    """A row-major (order C: row blocks) or column-major (order F: the panel's columns, each
    copied from A's column when its stride is 1 at run time; 183 scalar stores before in the
    200^3 f32 kernel)."""
    out = _code(m, n, k, dtype, cpu, order=order)
    assert out["config"]["pack"] is True and out["config"]["vnni"] == 1
    assert out["config"]["unit_stride_a"] is (order == "C"), out["config"]
    # Scalar stores to memory (vmovss / vmovsd / vextractps to an address): the old panel layout's
    # transposing copy (a 200^3 f32 kernel: 124 of them; f64: 185). The tiles keep none either.
    scalar_stores = re.findall(r"\b(?:vmovss|vmovsd|vextractps)\s+[^,]+,\s*-?\w*\(", out["asm"])
    assert len(scalar_stores) <= 2, (cpu, dtype, scalar_stores[:8])
    # The checked steps (M not a multiple of mr, or K not of kb) load rows as masked vectors.
    width = 32 if dtype == np.float32 else 64
    mr, kb = out["config"]["mr"], out["config"]["kb"]
    if order == "C" and (m % mr or k % kb):
        assert re.search(rf"llvm\.masked\.load\.v{kb}f{width}", out["llvm"]), (cpu, mr, kb)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(1, 40, 9), (7, 33, 5), (13, 64, 4), (29, 48, 131), (97, 97, 97), (200, 200, 200),
                                   (300, 200, 100), (130, 70, 1)])
@pytest.mark.parametrize("tile", [None, (5, 32), (6, 32), (12, 16), (16, 16)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("order", ["C", "F"])
def test_packed_products_against_float64(dtype, m, n, k, tile, threads, order):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = np.asarray(rng.standard_normal((m, k)).astype(dtype), order=order)
    b = rng.standard_normal((k, n)).astype(dtype)
    a0, b0 = a.copy(), b.copy()
    plan = {"pack": 1, "threads": threads}
    if tile:  # (AVX-512's tiles; an AVX2 CPU's 16 registers take them narrower: fit_tile)
        plan["mr"], plan["nr"] = fit_tile(*tile, dtype)
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


# ---- B column-major (a @ w.T): whole steps of simd_width rows, transposed in registers ----------

def _nt_code(m, n, k, dtype, cpu, plan):
    a = np.zeros((m, k), dtype)
    w = np.zeros((n, k), dtype)
    return coopjit.cross_compile(a, w.T, cpu=cpu, plan=plan, threads=2)


@pytest.mark.parametrize("cpu,width", [("emeraldrapids", 16), ("znver4", 16), ("haswell", 8)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("inline_b", [0, 1])
def test_column_major_b_copied_in_wide_steps(cpu, width, dtype, inline_b):
    """The packed kernel of a @ w.T loads simd_width rows of B's panel a step (a coopmatrix of W
    rows and nr columns with row stride 1), where it loaded kb (4) rows; the lowering transposes
    each W x W block with log2 W stages of two-vector shuffles (no S-source picks)."""
    out = _nt_code(256, 256, 256, dtype, cpu, {"pack": 1, "inline_b": inline_b})
    cfg = out["config"]
    assert cfg["pack"] is True and cfg["unit_stride_b"] is False and cfg["inline_b"] is bool(inline_b), cfg
    w = width if dtype == np.float32 else width // 2
    name = "f32" if dtype == np.float32 else "f64"
    # the wide steps' loop (induction variable kw): pack()'s copy, and pack_b_rows' with inline_b
    wide = re.findall(rf"coopmatrix\.load %B\[%kw[_0-9]*, [^\]]*\] strides\(%c1, %sb_c\)[^:]*: coopmatrix<{name}, (\d+), (\d+), b,",
                      out["ir"])
    if w > cfg["kb"]:
        assert wide and all(r == str(w) and c == str(cfg["nr"]) for r, c in wide), (w, cfg["nr"], wide)
    else:  # (AVX2 f64: 4 lanes, the K step itself: no wider step)
        assert not wide, wide


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(72, 56, 48), (200, 200, 200), (256, 256, 256), (300, 200, 100), (130, 97, 33),
                                   (64, 64, 15), (513, 129, 700), (40, 512, 17)])
@pytest.mark.parametrize("inline_b", [0, 1])
@pytest.mark.parametrize("threads", [1, 2])
def test_column_major_b_products_against_float64(dtype, m, n, k, inline_b, threads):
    """a @ w.T packed: K a multiple of 16 or not (the last rows in kb steps, the K tail checked), N
    past the last whole panel (its steps checked), 1 and 2 workers; w unmodified."""
    rng = np.random.default_rng(m + 7 * n + 11 * k)
    a = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((n, k)).astype(dtype)
    w0 = w.copy()
    c = coopjit.matmul(a, w.T, plan={"pack": 1, "inline_b": inline_b, "threads": threads})
    assert_gemm_close(c, a, w.T)
    np.testing.assert_array_equal(w, w0)


def test_strided_column_b_takes_the_checked_steps():
    """B of strided columns (row stride 2: not contiguous down K) takes the element-wise steps."""
    rng = np.random.default_rng(3)
    big = rng.standard_normal((96, 2 * 80)).astype(np.float32)
    w = big[:, ::2]  # (96, 80), strides (640, 8) bytes
    a = rng.standard_normal((70, 80)).astype(np.float32)
    for inline_b in (0, 1):
        c = coopjit.matmul(a, w.T, plan={"pack": 1, "inline_b": inline_b, "threads": 2})
        assert_gemm_close(c, a, np.ascontiguousarray(w.T))
