"""Session 29's audit of what session 28 added (the K split's large-alpha check, the SK + DP rule
and clusters on 128 x 320, AMX k_inner + nc_tiles, fenced cycles, the f32 N = 64 column tile and
batch shares, the small 8-bit VNNI products, the column reductions' new steps) and of what it left
(a large beta; the large-alpha check's cost, now in the core's run_gemm): each test is a bug the
audit found or a gap it closed (it failed before its fix). Records:
benchmarks/recorded/audit-zen5-session29.txt."""
import numpy as np
import pytest

import coopjit
from coopjit import _core
from test_audit_s28 import _PLANS  # the K-split plans of the large-alpha tests: beta takes the same


def _beta_operands(dtype, sign=1.0, k=8192):
    """a @ b whose two halves of K are +P and -P (P = X * k / 2, a part of the split) and a C with
    beta * c = 1.5 * 2^(emax - 1): beta * c + P overflows where beta * c + (a @ b) = beta * c fits.
    Returns a, b, c0 and beta (> 1)."""
    if dtype == np.float64:
        x, cval, beta = 2.0**1010, 1.5 * 2.0**900, 2.0**123
    else:
        x, cval, beta = 2.0**115, 1.5 * 2.0**100, 2.0**27
    a = np.ones((4, k), dtype)
    b = np.empty((k, 5), dtype)
    b[: k // 2] = x
    b[k // 2 :] = -x
    c0 = np.full((4, 5), sign * cval, dtype)
    return a, b, c0, sign * beta




@pytest.mark.parametrize("plan", _PLANS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_large_finite_beta_adds_c_to_the_whole_sum(plan, dtype, sign):
    # The kernels add beta * c first and then each part of a split K: beta * c + part overflowed
    # where beta * c + (a @ b) fits (f32: beta 2^27, c 1.5 * 2^100, parts of +-2^127: inf where
    # NumPy's is 2.55e38).
    a, b, c0, beta = _beta_operands(dtype, sign)
    a0, b0 = a.copy(), b.copy()
    want = (a.astype(np.float64) @ b.astype(np.float64)) + beta * c0.astype(np.float64)
    assert np.isfinite(want.astype(dtype)).all()
    c = c0.copy()
    got = coopjit.gemm(a, b, c, beta=beta, plan=plan)
    assert got is c
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=1e-6)
    # into a strided view: nothing else written
    big = np.full((12, 12), 7.0, dtype)
    view = big[1:9:2, 2:12:2]
    view[...] = c0
    coopjit.gemm(a, b, view, beta=beta, plan=plan)
    np.testing.assert_allclose(view.astype(np.float64), want, rtol=1e-6)
    mask = np.ones(big.shape, bool)
    mask[1:9:2, 2:12:2] = False
    assert (big[mask] == 7.0).all()
    # a compiled kernel with accumulate
    kern = coopjit.compile_gemm(4, 5, a.shape[1], dtype, accumulate=True, plan=plan)
    c = c0.copy()
    kern(a, b, c, beta=beta)
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=1e-6)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_alpha_and_beta_together(dtype):
    # alpha 4 and a large beta: alpha * part + beta * c overflows, the whole fits
    a, b, c0, beta = _beta_operands(dtype)
    alpha = 4.0
    b = b / 8
    want = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c0.astype(np.float64)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=alpha, beta=beta)
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=1e-6)


def test_true_overflow_and_nan_stay_as_numpy():
    # a product that overflows as a whole, and a NaN in c: the check's recomputation gives NumPy's
    a, b, c0, beta = _beta_operands(np.float32)
    c = c0.copy()
    c[0, 0] = np.nan
    c[1, 1] = 3e38
    with np.errstate(all="ignore"):
        want = ((a.astype(np.float64) @ b.astype(np.float64)) + beta * c.astype(np.float64)).astype(np.float32)
    coopjit.gemm(a, b, c, beta=beta)
    assert np.isnan(c[0, 0]) and c[1, 1] == np.inf
    np.testing.assert_array_equal(c, want)


def test_core_check_puts_c_back_only_where_the_plan_splits_k():
    # _core.gemm(check_scaled=True): True and C as before where the split's scaled parts
    # overflowed; without check_scaled (the other callers), the kernels' result as before.
    a, b, c0, beta = _beta_operands(np.float32)
    c = c0.copy()
    assert _core.gemm(a, b, c, 1.0, beta, {}, ["f32", "f32", "f32"], check_scaled=True) is True
    np.testing.assert_array_equal(c, c0)
    c = c0.copy()
    assert _core.gemm(a, b, c, 1.0, beta, {}, ["f32", "f32", "f32"]) is False
    assert np.isinf(c).all()
    # a K the plan does not split (K = 64 in one K tile): not checked, the overflow is the product's
    a64 = np.full((4, 64), 2.0**64, np.float32)
    b64 = np.full((64, 5), 2.0**64, np.float32)
    c = np.zeros((4, 5), np.float32)
    assert _core.gemm(a64, b64, c, 2.0, 0.0, {}, ["f32", "f32", "f32"], check_scaled=True) is False
    assert np.isinf(c).all()
    # ordinary data with alpha 2 / beta 0.5: the same bits as without the check
    rng = np.random.default_rng(29)
    x = rng.standard_normal((64, 3000)).astype(np.float32)
    y = rng.standard_normal((3000, 48)).astype(np.float32)
    z0 = rng.standard_normal((64, 48)).astype(np.float32)
    z1, z2 = z0.copy(), z0.copy()
    assert _core.gemm(x, y, z1, 2.0, 0.5, {}, ["f32", "f32", "f32"], check_scaled=True) is False
    _core.gemm(x, y, z2, 2.0, 0.5, {}, ["f32", "f32", "f32"])
    np.testing.assert_array_equal(z1, z2)


@pytest.mark.parametrize("call", ["matmul", "gemm", "kernel"])
@pytest.mark.parametrize("dtype", [np.float32, "int8"])
def test_prepacked_b_plan_with_an_array_b_is_refused_naming_it(call, dtype):
    # plan prepacked_b=1 (with pack=1, or on a plan the nest packs anyway) and b an array: an
    # internal RuntimeError ("the plan expects a prepacked B") before; a ValueError naming the
    # field and coopjit.prepack now, c untouched
    a = np.ones((64, 96), dtype)
    b = np.ones((96, 80), dtype)
    plan = {"prepacked_b": 1, "pack": 1}
    c = np.full((64, 80), 5, np.int32 if dtype == "int8" else dtype)
    with pytest.raises(ValueError, match=r"prepacked_b=1.*coopjit\.prepack"):
        if call == "matmul":
            coopjit.matmul(a, b, plan=plan, out=c)
        elif call == "gemm":
            coopjit.gemm(a, b, c, plan=plan)
        else:
            coopjit.compile_gemm(64, 80, 96, dtype, plan=plan)(a, b, c)
    assert (c == 5).all()
    # the packed B itself still runs that plan
    got = coopjit.matmul(a, coopjit.prepack(b))
    np.testing.assert_array_equal(got, np.full((64, 80), 96))
