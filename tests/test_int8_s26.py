"""int8 products on 2 workers with each worker's own packed copy of A (plan own_a, session 26:
the planner's default for int8 / uint8 dot products on 2-4 workers of a machine under 8 cores):
against an int64 NumPy reference (seeded operands), over signs, the -128 / 127 extremes, K
remainders of the 4-wide VNNI groups, M / N edges of the 6 x 64 tile, out=, alpha / beta, a
prepacked B and the uint8 pairs; own_a 0 and 1 forced and the planner's own choice."""
import numpy as np
import pytest

import coopjit

PLANS = [None, {"pack": 1, "threads": 2, "own_a": 1}, {"pack": 1, "threads": 2, "own_a": 0},
         {"pack": 1, "threads": 2, "own_a": 1, "inline_b": 0}, {"pack": 1, "threads": 2, "own_a": 1, "inline_b": 1}]
SHAPES = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (64, 4096, 4096), (65, 129, 4097), (7, 130, 9),
          (97, 193, 255), (300, 70, 1), (13, 128, 3), (385, 257, 1030)]


def ref(a, b):
    return a.astype(np.int64) @ b.astype(np.int64)


def check(got, want):
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.astype(np.int64), want)


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: "default" if p is None else "-".join(f"{k}{v}" for k, v in p.items()))
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_int8_random(m, n, k, plan):
    rng = np.random.default_rng(m * 7919 + n * 31 + k)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    check(coopjit.matmul(a, b, plan=plan), ref(a, b))


@pytest.mark.parametrize("plan", PLANS[:3], ids=["default", "own_a1", "own_a0"])
@pytest.mark.parametrize("va,vb", [(-128, 127), (-128, -128), (127, 127), (127, -128)])
def test_int8_extremes(va, vb, plan):
    m, n, k = 259, 131, 1029  # K past 4 * 256, M and N off the tile
    a = np.full((m, k), va, np.int8)
    b = np.full((k, n), vb, np.int8)
    a[::5, ::3] = -va if va != -128 else 127
    check(coopjit.matmul(a, b, plan=plan), ref(a, b))


@pytest.mark.parametrize("plan", PLANS[:3], ids=["default", "own_a1", "own_a0"])
def test_int8_out_and_alpha_beta(plan):
    rng = np.random.default_rng(5)
    m, n, k = 301, 190, 515
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    out = np.full((m, n), -7, np.int32)
    a0, b0 = a.copy(), b.copy()
    r = coopjit.matmul(a, b, out=out, plan=plan)
    assert r is out
    check(out, ref(a, b))
    c = rng.integers(-1000, 1000, (m, n), dtype=np.int32)
    c0 = c.astype(np.int64)
    r = coopjit.gemm(a, b, c, alpha=3, beta=-2, plan=plan)
    check(r, 3 * ref(a, b) - 2 * c0)
    np.testing.assert_array_equal(a, a0)  # the inputs are left as they were
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("m,n,k", [(256, 256, 256), (130, 200, 513), (1024, 1024, 1024)])
def test_int8_prepacked_b(m, n, k):
    rng = np.random.default_rng(m + n + k)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    pb = coopjit.prepack(b)
    check(coopjit.matmul(a, pb), ref(a, b))
    check(coopjit.matmul(a, pb, plan={"pack": 1, "threads": 2, "own_a": 1}), ref(a, b))


@pytest.mark.parametrize("plan", PLANS[:3], ids=["default", "own_a1", "own_a0"])
@pytest.mark.parametrize("ta,tb", [(np.uint8, np.int8), (np.uint8, np.uint8)])
def test_uint8_pairs(ta, tb, plan):
    rng = np.random.default_rng(11)
    m, n, k = 263, 140, 518
    lo = lambda t: 0 if t == np.uint8 else -128  # noqa: E731
    a = rng.integers(lo(ta), 256 + lo(ta), (m, k), dtype=ta)
    b = rng.integers(lo(tb), 256 + lo(tb), (k, n), dtype=tb)
    a[0, :] = 255
    b[:, 0] = np.iinfo(tb).min
    check(coopjit.matmul(a, b, plan=plan), ref(a, b))


@pytest.mark.parametrize("m,n,k", [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (64, 4096, 4096)])
def test_planner_takes_own_a_on_2_workers(m, n, k):
    if coopjit.get_num_threads() != 2 or coopjit.cpu_info()["features"].get("amx-tile"):
        pytest.skip("the planner's own_a rule is for 2-4 workers without AMX (this run: other worker counts or AMX)")
    cfg = coopjit.compile_gemm(m, n, k, np.int8).config
    if cfg["vnni"] != 4:
        pytest.skip(f"no VNNI dot products on {coopjit.cpu_info()['name']} (int8 widened on load, vnni {cfg['vnni']}): "
                    "the own_a rule is for VNNI panels")
    assert cfg["own_a"], cfg
