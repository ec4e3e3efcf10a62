"""The unpacked tile walk over long K (session 27): with rows of B of 192 bytes or more (f32 nr 48,
f64 nr 24 on AVX-512) the loop over blocks of 2048 elements of K is outside the walk over the
worker's tiles, each block added into C; narrower tiles keep the blocks inside each tile. Checked
against NumPy in float64 (int64 for the exact cases), the seed fixed by conftest's rng.

Small integers in floats: every partial sum is an integer below 2**24, so any block skipped, added
twice or taken at the wrong offset of A or B shows as an exact mismatch."""
import numpy as np
import pytest

import coopjit

# K: one block and a bit, partial blocks, a K tail that is not a multiple of the plan's kb.
SHAPES = [(96, 96, 2049), (96, 96, 4097), (200, 100, 6147), (17, 130, 8191), (8, 48, 4096), (3, 200, 2050)]
PLANS = [None, {"pack": 0, "nr": 48, "order": "m_inner"}, {"pack": 0, "nr": 48, "order": "m_inner", "threads": 2},
         {"pack": 0, "nr": 32, "order": "m_inner"}, {"pack": 0, "nr": 32, "order": "m_inner", "threads": 2}]
PLAN_IDS = ["default", "nr48", "nr48-2threads", "nr32", "nr32-2threads"]


@pytest.mark.parametrize("plan", PLANS, ids=PLAN_IDS)
@pytest.mark.parametrize("m,n,k", SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_long_k_walk_exact_on_small_integers(rng, dt, m, n, k, plan):
    a = rng.integers(0, 4, (m, k)).astype(dt)
    b = rng.integers(0, 4, (k, n)).astype(dt)
    exact = a.astype(np.int64) @ b.astype(np.int64)
    got = coopjit.matmul(a, b, plan=plan)
    assert got.dtype == dt
    np.testing.assert_array_equal(got.astype(np.int64), exact)


@pytest.mark.parametrize("plan", PLANS, ids=PLAN_IDS)
@pytest.mark.parametrize("beta", [0.0, 1.0, -0.5])
def test_long_k_walk_alpha_beta(rng, plan, beta):
    # The first block applies alpha and beta to C, the others add alpha times their sums.
    m, n, k = 40, 100, 5000
    a = rng.random((m, k), dtype=np.float32)
    b = rng.random((k, n), dtype=np.float32)
    c = rng.random((m, n), dtype=np.float32)
    c0 = c.copy()
    exact = 0.75 * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c0.astype(np.float64)
    a0, b0 = a.copy(), b.copy()
    coopjit.gemm(a, b, c, alpha=0.75, beta=beta, plan=plan)
    assert float(np.max(np.abs(c - exact) / np.abs(exact).max())) <= 16 * float(np.finfo(np.float32).eps)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("plan", PLANS[:3], ids=PLAN_IDS[:3])
def test_long_k_walk_strided_and_batched(rng, plan):
    # A transposed (column stride 1 along M), B a column slice, and a batch of two products.
    k = 4500
    at = rng.integers(0, 4, (k, 96)).astype(np.float32)
    bw = rng.integers(0, 4, (k, 150)).astype(np.float32)
    a, b = at.T, bw[:, 10:130]
    exact = a.astype(np.int64) @ b.astype(np.int64)
    np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan).astype(np.int64), exact)
    a3 = rng.integers(0, 4, (2, 50, k)).astype(np.float32)
    b3 = rng.integers(0, 4, (2, k, 96)).astype(np.float32)
    np.testing.assert_array_equal(coopjit.matmul(a3, b3, plan=plan).astype(np.int64),
                                  a3.astype(np.int64) @ b3.astype(np.int64))


def test_long_k_walk_plans_are_the_unpacked_walk():
    # The shapes above reach the walk this file is about (not the packed nest) on this CPU's plans.
    kern = coopjit.compile_gemm(96, 96, 4097, np.float32, plan={"pack": 0, "nr": 48, "order": "m_inner"})
    assert kern.config["pack"] in (False, "false") and int(kern.config["nr"]) == 48
