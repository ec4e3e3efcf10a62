"""Session 27's audit of what session 26 added: the K split of a whole block of C (plan ksplit),
the long-K sums (blocks of 2048 K added into C), the overlap refusals, the Hopper register check,
dask.gemm's alpha. Each test is a bug the audit found (it failed before its fix);
scripts/fuzz_ksplit.py is the sweep of K-split products against NumPy in float64."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import load_script

BF16 = ml_dtypes.bfloat16


def _half_zero_operands(dtype, k=8192):
    # a @ b sums K ones of which the first half are 0: any part of K in that half sums to 0
    a = np.ones((4, k), dtype)
    b = np.ones((k, 5), dtype)
    b[: k // 2] = 0
    b[:, 1] = -b[:, 1]
    b[: k // 4, 2] = 1000  # parts of opposite signs: 2048 * 1000 - 4096
    b[k // 4 :, 2] = -1
    return a, b


@pytest.mark.parametrize("plan", [None, {"order": "k_outer", "ksplit": 2, "threads": 2},
                                  {"order": "k_outer", "ksplit": 5, "threads": 3, "kt": 64},
                                  {"order": "m_inner", "threads": 1}, {"split": "sk", "threads": 2}])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
@pytest.mark.parametrize("alpha", [np.inf, -np.inf])
def test_infinite_alpha_scales_the_whole_sum(plan, dtype, alpha):
    # The K split's parts and the tile walk's blocks of 2048 K (session 26) were each scaled by
    # alpha before they were added: alpha = inf gave inf * 0 = NaN for a part summing to 0, and
    # inf - inf = NaN for parts of opposite signs, where NumPy's alpha * (a @ b) is an infinity.
    a, b = _half_zero_operands(dtype)
    a0, b0 = a.copy(), b.copy()
    with np.errstate(all="ignore"):
        want = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    got = coopjit.gemm(a, b, alpha=alpha, plan=plan)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.astype(np.float64), want)
    # into a strided view of c with beta: alpha * (a @ b) + beta * c once, nothing else written
    big = np.full((12, 12), 7.0, dtype)
    view = big[1:9:2, 2:12:2]
    view[...] = np.arange(20).reshape(4, 5)
    c0 = view.astype(np.float64)
    coopjit.gemm(a, b, view, alpha=alpha, beta=0.5, plan=plan)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(view.astype(np.float64), want + 0.5 * c0)
    mask = np.ones(big.shape, bool)
    mask[1:9:2, 2:12:2] = False
    assert (big[mask].astype(np.float64) == 7.0).all()
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


def test_infinite_alpha_keeps_gemm_s_checks(rng):
    a = np.ones((4, 3000), np.float32)
    b = np.ones((3000, 5), np.float32)
    with pytest.raises(ValueError, match=r"c has shape \(5, 4\) but op\(a\) @ op\(b\) has shape \(4, 5\)"):
        coopjit.gemm(a, b, np.zeros((5, 4), np.float32), alpha=np.inf)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        coopjit.gemm(a, b[:10], alpha=np.inf)
    with pytest.raises(TypeError):
        coopjit.gemm(a, b, np.zeros((4, 5), np.int32), alpha=np.inf)
    ro = np.zeros((4, 5), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        coopjit.gemm(a, b, ro, alpha=np.inf)
    with pytest.raises(ValueError, match="alpha"):
        coopjit.gemm(np.ones((4, 30), np.int8), np.ones((30, 5), np.int8), alpha=np.inf)
    # beta 0: c is not read (its NaN does not propagate); a transposed a and b
    c = np.full((4, 5), np.nan, np.float32)
    coopjit.gemm(a.T.copy(), b.T.copy(), c, alpha=-np.inf, trans_a=True, trans_b=True)
    assert (c == -np.inf).all()


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_compiled_kernel_with_infinite_alpha_scales_the_whole_sum(dtype):
    a, b = _half_zero_operands(dtype)
    with np.errstate(all="ignore"):
        want = np.inf * (a.astype(np.float64) @ b.astype(np.float64))
    kern = coopjit.compile_gemm(4, 5, 8192, dtype)
    np.testing.assert_array_equal(kern(a, b, alpha=np.inf).astype(np.float64), want)
    np.testing.assert_array_equal(kern(a, b, alpha=-np.inf).astype(np.float64), -want)
    acc = coopjit.compile_gemm(4, 5, 8192, dtype, accumulate=True)
    c = np.arange(20).reshape(4, 5).astype(dtype)
    c0 = c.astype(np.float64)
    got = acc(a, b, c, alpha=np.inf, beta=-1.0)
    assert got is c
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(c.astype(np.float64), want - c0)
    with pytest.raises(ValueError, match="beta=1.0 needs a kernel compiled with accumulate=True"):
        kern(a, b, np.zeros((4, 5), dtype), alpha=np.inf, beta=1.0)


@pytest.mark.parametrize("seed", [1, 2])
def test_fuzzed_k_split_products_match_numpy(seed):
    fz = load_script("fuzz_ksplit")
    failures, stats = fz.fuzz_common.sweep(fz.draw, fz.run_case, fz.describe, np.random.default_rng(seed), 15)
    assert not failures, failures[:5]
    assert stats["ran"] >= 5, stats
