"""Session 29 (issue 14): the packed nest with B packed by its reader (inline_b) in shares (each share
a range of column panels with its own slot of B, handed out by the pool after a launch that packs
A), and b_prefetch on inline_b plans (B's rows prefetched further on in K as a worker packs its
slices). Every product is checked against NumPy in float64 (int8 exactly), with the plans forced
(plan=) on a pool of 16 workers here; seeds from conftest's rng fixture."""
import numpy as np
import pytest

import coopjit
from coopjit import _core
from coopjit._arrays import gemm_types
from conftest import planned

HOST = "emeraldrapids"


def plan_here(a, b, plan=None):
    types, dt = gemm_types(a.dtype, b.dtype)
    c = np.empty(a.shape[:-1] + (b.shape[-1],), dt)
    return _core.gemm_plan(a, b, c, False, list(types), coopjit._kernel_args._overrides(plan) if plan else {})


def check(a, b, got, beta_c=None, alpha=1.0):
    if a.dtype == np.int8:
        ref = a.astype(np.int64) @ b.astype(np.int64)
        assert np.array_equal(got.astype(np.int64), ref)
        return
    ref = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if beta_c is not None:
        ref = ref + beta_c.astype(np.float64)
    eps = np.finfo(a.dtype).eps
    bound = 4 * a.shape[-1] * eps * (abs(alpha) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) +
                                     (np.abs(beta_c.astype(np.float64)) if beta_c is not None else 0))
    assert got.shape == ref.shape and np.all(np.abs(got - ref) <= bound), np.max(np.abs(got - ref) - bound)


def operands(rng, m, n, k, dtype):
    if dtype == np.int8:
        return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)
    return rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)


# (M, N, K): whole panels; a ragged N (the last share's panel checked at B's edge) and K (the K tail);
# fewer column panels than shares (shares with no panel)
SHAPES = [(64, 1024, 1024), (16, 2000, 1500), (37, 515, 700), (64, 256, 512)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("shares", [2, 4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8])
def test_inline_b_in_shares_matches_numpy(rng, pool, m, n, k, shares, dtype):
    pool(16)
    a, b = operands(rng, m, n, k, dtype)
    plan = {"pack": 1, "inline_b": 1, "shares": shares}
    cfg = plan_here(a, b, plan)
    assert (cfg["inline_b"], cfg["shares"], cfg["grid_m"], cfg["threads"]) == ("true", str(shares), "1", "16"), cfg
    got = coopjit.matmul(a, b, plan=plan)
    check(a, b, got)
    # again (the panel memory reused), and into a C with beta through gemm's out= / alpha
    check(a, b, coopjit.matmul(a, b, plan=plan))


@pytest.mark.parametrize("shares", [1, 4])
@pytest.mark.parametrize("pf", [256, 1024, 4096])
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_inline_b_with_b_prefetch_matches_numpy(rng, pool, shares, pf, dtype):
    pool(16)
    a, b = operands(rng, 64, 1000, 1024, dtype)  # (1000 columns: the last panel's rows are checked loads)
    plan = {"pack": 1, "inline_b": 1, "shares": shares, "b_prefetch": pf}
    cfg = plan_here(a, b, plan)
    assert (cfg["inline_b"], cfg["b_prefetch"]) == ("true", str(pf)), cfg
    check(a, b, coopjit.matmul(a, b, plan=plan))
    # the last rows of B: the prefetched row is clamped to B's last (K just past a few K tiles)
    a2, b2 = operands(rng, 20, 512, 130, dtype)
    check(a2, b2, coopjit.matmul(a2, b2, plan=plan))


def test_inline_b_shares_with_strided_operands_and_beta(rng, pool):
    pool(16)
    a = rng.standard_normal((48, 2 * 900)).astype(np.float32)[:, ::2]  # A strided (packed anyway)
    b = rng.standard_normal((900, 768)).astype(np.float32)
    c0 = rng.standard_normal((48, 768)).astype(np.float32)
    out = c0.copy()
    plan = {"pack": 1, "inline_b": 1, "shares": 4, "b_prefetch": 1024}
    coopjit.gemm(a, b, out, alpha=0.5, beta=1.0, plan=plan)
    check(a, b, out, beta_c=c0, alpha=0.5)
    a0, b0 = a.copy(), b.copy()
    coopjit.matmul(a, b, plan=plan)
    assert np.array_equal(a, a0) and np.array_equal(b, b0)  # inputs untouched


def test_bad_inline_b_share_and_prefetch_plans_are_refused(rng):
    a, b = np.ones((64, 600), np.float32), np.ones((600, 1024), np.float32)
    # shares still need the packed nest (or the unpacked walks') and a data-parallel split
    with pytest.raises(ValueError, match=r"shares=2 cuts the packed blocked nest.*order=k_outer"):
        coopjit.matmul(a, b, plan={"order": "k_outer", "pack": 0, "shares": 2})
    # b_prefetch on the packed nest without inline_b names both
    with pytest.raises(ValueError, match=r"b_prefetch=64 prefetches B's rows .*inline_b=1.*m_inner \(inline_b=0\)"):
        coopjit.matmul(a, b, plan={"pack": 1, "inline_b": 0, "b_prefetch": 64})
    with pytest.raises(ValueError, match="b_prefetch=100 must be a multiple of 64 bytes"):
        coopjit.matmul(a, b, plan={"pack": 1, "inline_b": 1, "b_prefetch": 100})


def test_emerald_rapids_skinny_plans_keep_their_fields_unless_named():
    # (the skinny rows on 16 cores: inline_b in 4 shares a thread, no prefetch; 8 rows, 2 threads one share)
    for dt in (np.float32, np.int8):
        cfg = planned(64, 4096, 4096, dt, cpu=HOST)
        assert (cfg["inline_b"], cfg["shares"], cfg["b_prefetch"]) == (True, 4, 0), (dt, cfg)
        assert planned(8, 4096, 4096, dt, cpu=HOST)["shares"] == 1
        assert planned(64, 4096, 4096, dt, cpu="znver5", threads=2)["shares"] == 1
        named = planned(64, 4096, 4096, dt, cpu=HOST, plan={"inline_b": 1, "shares": 2, "b_prefetch": 2048})
        assert (named["inline_b"], named["shares"], named["b_prefetch"], named["grid_m"]) == (True, 2, 2048, 1), named
    assert planned(64, 4096, 4096, cpu=HOST, plan={"shares": 1})["shares"] == 1
