"""Matrix-vector products (the dot walk) in shares on many cores (issue 14, session 22): the planner
cuts the walk's row blocks into up to 4 shares a thread on 8+ cores (each at least 256 KiB of A),
handed out by the pool like the packed nest's, so that a thread done early takes a slower one's
next block. Plans are read through coopjit.cross_compile (16-core Sapphire Rapids, 2-core Zen 4 /
Zen 5) and from this machine's planner with a pool of 16; every product is checked against NumPy in
float64, with odd sizes, strided and transposed operands, alpha / beta and out=."""
import numpy as np
import pytest

import coopjit
from conftest import planned


@pytest.mark.parametrize("m,k,shares", [(4096, 4096, 4), (2048, 2048, 4), (16384, 4096, 4), (2048, 1024, 2),
                                        (1024, 1024, 1), (4099, 3001, 4)])
def test_gemv_takes_shares_on_many_cores(m, k, shares):
    cfg = planned(m, 1, k, np.float32)
    assert cfg["order"] == "dot" and cfg["threads"] == 16, cfg
    # up to 4 a thread, each at least 256 KiB of A
    assert cfg["shares"] == max(1, min(4, m * k * 4 // (16 << 18))) == shares, cfg
    # f64: twice the bytes a row
    assert planned(m, 1, k, np.float64)["shares"] == max(1, min(4, m * k * 8 // (16 << 18)))


@pytest.mark.parametrize("threads,cpu", [(2, "znver4"), (2, "znver5"), (4, "znver4"), (7, "sapphirerapids")])
def test_gemv_keeps_one_share_a_worker_on_few_cores(threads, cpu):
    cfg = planned(4096, 1, 4096, np.float32, threads=threads, cpu=cpu)
    assert (cfg["order"], cfg["shares"]) == ("dot", 1), cfg


def test_gemv_shares_only_where_the_walk_is_dot():
    # a vector times a matrix (one row of C) is the k_outer walk: no shares
    cfg = planned(1, 4096, 4096, np.float32)
    assert (cfg["order"], cfg["shares"]) == ("k_outer", 1), cfg
    # the override: any count for the dot walk; on other unpacked walks the clear error of before
    assert planned(4096, 1, 4096, np.float32, plan={"shares": 2})["shares"] == 2
    assert planned(4096, 1, 4096, np.float32, plan={"shares": 1})["shares"] == 1
    with pytest.raises(ValueError, match=r"needs split='dp'"):
        planned(4096, 1, 4096, np.float32, plan={"shares": 2, "split": "sk"})
    with pytest.raises(ValueError, match=r"shares=2 cuts the packed blocked nest.*order=k_outer"):
        planned(1, 4096, 4096, np.float32, plan={"shares": 2})
    # the unpacked tile walk: 4 a thread from 50 MFLOP a worker with 16 row tiles a thread
    cfg = planned(4096, 64, 4096, np.float32)
    assert (cfg["order"], cfg["pack"], cfg["split"], cfg["shares"]) == ("m_inner", False, "dp", 4), cfg
    assert planned(4096, 64, 4096, np.float32, plan={"shares": 1})["shares"] == 1
    small = planned(1000, 64, 1000, np.float32)  # 128 MFLOP on 16: 2 shares a worker (session 29's rule)
    assert (small["pack"], small["shares"]) == (False, 2), small
    assert planned(1000, 64, 1000, np.float64)["shares"] == 1  # (f32 only)
    for threads, cpu in [(2, "znver5"), (7, "sapphirerapids")]:
        assert planned(4096, 64, 4096, np.float32, threads=threads, cpu=cpu)["shares"] == 1
    with pytest.raises(ValueError, match=r"shares=4 hands out the m_inner walk's row blocks: it needs split='dp'"):
        planned(4096, 64, 4096, np.float32, plan={"shares": 4, "split": "sk"})


def _ref(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("m,k", [(4099, 3001), (2053, 777), (1031, 4097), (64 * 16 * 4 + 3, 1000)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shares", [None, 1, 3, 4, 64])
def test_gemv_in_shares_matches_numpy(rng, pool, m, k, dtype, shares):
    pool(16)
    a = rng.standard_normal((m, k)).astype(dtype)
    x = rng.standard_normal((k, 1)).astype(dtype)
    plan = None if shares is None else {"shares": shares}
    cfg = coopjit.compile_gemm(m, 1, k, dtype, plan=plan).config
    assert cfg["order"] == "dot", cfg
    if shares is not None:
        assert cfg["shares"] == shares
    got = coopjit.matmul(a, x, plan=plan)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    ref = _ref(a, x)
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol * np.abs(a).sum(axis=1, keepdims=True).max())
    # 1-D vector, out= with alpha / beta through gemm's accumulate form: C = alpha A x + beta C
    v = x[:, 0]
    np.testing.assert_allclose(coopjit.matmul(a, v, plan=plan), ref[:, 0], rtol=0,
                               atol=tol * np.abs(a).sum(axis=1).max())


@pytest.mark.parametrize("shares", [None, 4])
def test_gemv_in_shares_with_strided_and_transposed_operands(rng, pool, shares):
    pool(16)
    plan = None if shares is None else {"shares": shares}
    big = rng.standard_normal((4100, 2 * 3001)).astype(np.float32)
    a = big[:, ::2][:4099]  # rows of stride 2 elements along K: not the dot walk's unit stride
    x = rng.standard_normal((3001, 1)).astype(np.float32)
    ref = _ref(a, x)
    atol = 1e-5 * np.abs(a).sum(axis=1).max()
    np.testing.assert_allclose(coopjit.matmul(a, x, plan=None), ref, rtol=0, atol=atol)
    # a row-sliced A (row stride 2 rows, unit along K): the dot walk with shares
    a2 = big[::2, :3001]
    assert a2.strides[1] == 4
    cfg = coopjit.compile_gemm(a2.shape[0], 1, 3001, np.float32).config
    np.testing.assert_allclose(coopjit.matmul(a2, x, plan=plan), _ref(a2, x), rtol=0,
                               atol=1e-5 * np.abs(a2).sum(axis=1).max())
    # x^T A^T (1 x K times K x M, A^T a transposed view): C^T's column is the dot walk again
    at = np.ascontiguousarray(a2).T
    np.testing.assert_allclose(coopjit.matmul(x.T, at, plan=plan), _ref(x.T, at), rtol=0,
                               atol=1e-5 * np.abs(a2).sum(axis=1).max())
    assert cfg["order"] == "dot"


def test_gemv_in_shares_with_alpha_beta_leaves_the_inputs(rng, pool):
    pool(16)
    m, k = 4099, 3001
    a = rng.standard_normal((m, k)).astype(np.float32)
    x = rng.standard_normal((k, 1)).astype(np.float32)
    c0 = rng.standard_normal((m, 1)).astype(np.float32)
    a_copy, x_copy = a.copy(), x.copy()
    kern = coopjit.compile_gemm(m, 1, k, np.float32, accumulate=True)
    assert kern.config["shares"] == 4 and kern.config["order"] == "dot", kern.config
    c = c0.copy()
    kern(a, x, c, alpha=0.5, beta=-2.0)
    ref = 0.5 * _ref(a, x) - 2.0 * c0.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=0, atol=1e-5 * np.abs(a).sum(axis=1).max())
    np.testing.assert_array_equal(a, a_copy)
    np.testing.assert_array_equal(x, x_copy)


@pytest.mark.parametrize("m,n,k", [(4099, 64, 1001), (1000, 70, 333), (37, 300, 200)])
@pytest.mark.parametrize("shares", [1, 4])
def test_unpacked_tile_walk_in_shares_matches_numpy(rng, pool, m, n, k, shares):
    pool(16)
    plan = {"shares": shares, "pack": 0, "split": "dp", "order": "m_inner"}
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    cfg = coopjit.compile_gemm(m, n, k, np.float32, plan=plan).config
    assert (cfg["order"], cfg["shares"], cfg["pack"]) == ("m_inner", shares, False), cfg
    atol = 1e-5 * (np.abs(a) @ np.abs(b)).max()
    np.testing.assert_allclose(coopjit.matmul(a, b, plan=plan), _ref(a, b), rtol=0, atol=atol)
    # transposed B (a view): the walk in the other orientation
    bt = np.ascontiguousarray(b.T).T
    np.testing.assert_allclose(coopjit.matmul(a, bt, plan=plan), _ref(a, bt), rtol=0, atol=atol)
