"""The CPU kernel holds only the walks its plan can run (session 35): a data-parallel plan's
kernel has no Stream-K walk (its key says which: ".sk"), and the long-K walk over blocks of K is
one loop nest for both of its orders (blocks outside the tiles for N over 64, inside each tile up
to 64). Results against NumPy in float64, for every walk and both orders, with 1 and 2 workers,
K not a whole number of blocks, and accumulate (C's old values added)."""
import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close, fit_tile


def _ir(m, n, k, dtype, plan, threads=2):
    a = np.zeros((m, k), dtype)
    b = np.zeros((k, n), dtype)
    return coopjit.cross_compile(a, b, cpu="znver4", threads=threads, plan=plan, code=False)


@pytest.mark.parametrize("plan", [{"split": "dp"}, {"split": "dp", "pack": 1}, {"split": "sk", "threads": 1}])
def test_a_data_parallel_plan_has_no_stream_k_walk(plan):
    out = _ir(300, 200, 500, np.float32, plan)
    assert ".sk" not in out["key"], out["key"]
    assert "sk_per" not in out["ir"] and "send_partial" not in out["ir"]


@pytest.mark.parametrize("plan", [{"split": "sk"}, {"split": "sk+dp"}, {"split": "sk", "pack": 1}])
def test_a_stream_k_plan_keeps_its_walk(plan):
    out = _ir(300, 200, 500, np.float32, {**plan, "threads": 2})
    assert out["key"].endswith(".sk") or ".sk." in out["key"], out["key"]
    assert "sk_per" in out["ir"] and "send_partial" in out["ir"]


def test_the_long_k_walk_is_one_nest_for_both_orders():
    # f32 8 x 48 and 6 x 64 tiles (rows of B 192 bytes and more): both orders, one copy of the
    # blocks' K loops (one "first_kc" branch: the first block stores, the others add).
    for plan in ({"mr": 6, "nr": 64, "pack": 0, "order": "m_inner"}, {"mr": 8, "nr": 48, "pack": 0, "order": "m_inner"}):
        ir = _ir(96, 96, 16384, np.float32, {**plan, "split": "dp"})["ir"]
        assert ir.count("%wide_n = ") == 1 and ir.count("%first_kc = ") == 1, plan


PLANS = [{"mr": 6, "nr": 64, "pack": 0, "order": "m_inner", "kt": 256},
         {"mr": 8, "nr": 48, "pack": 0, "order": "m_inner", "kt": 128},
         {"mr": 4, "nr": 16, "pack": 0, "order": "m_inner", "kt": 256}]


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("m,n,k", [(96, 96, 4200), (50, 48, 4200), (13, 130, 2300), (70, 64, 6000)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("accumulate", [False, True])
def test_long_k_walks_match_numpy(plan, m, n, k, threads, accumulate, rng):
    # K past the 2048-element blocks (K = 4200 at kt 256: 17 K tiles, blocks of 8, the last of
    # one); N over 64 (blocks outside the tiles) and up to 64 (inside), edge tiles in M and N.
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = c0.copy()
    mr, nr = fit_tile(plan["mr"], plan["nr"])  # (AVX-512's tiles, narrower on AVX2's 16 registers)
    kern = coopjit.compile_gemm(m, n, k, np.float32, accumulate=accumulate,
                                plan={**plan, "mr": mr, "nr": nr, "threads": threads, "split": "dp"})
    assert kern.config["order"] == "m_inner" and int(kern.config["threads"]) == threads
    if accumulate:
        kern(a, b, c, beta=1.0)
        assert_gemm_close(c, a, b, c0, beta=1.0)
    else:
        kern(a, b, c)
        assert_gemm_close(c, a, b)


@pytest.mark.parametrize("split", ["dp", "sk", "sk+dp"])
@pytest.mark.parametrize("pack", [0, 1])
def test_each_split_matches_numpy_with_its_own_kernel(split, pack, rng):
    # The same shape under each split: a kernel each (the data-parallel one without the Stream-K
    # walk), every result against float64.
    m, n, k = 150, 90, 700
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    kern = coopjit.compile_gemm(m, n, k, np.float32, plan={"split": split, "threads": 2, "pack": pack, "kt": 64})
    assert kern.config["split"] == split
    c = np.full((m, n), np.nan, np.float32)
    kern(a, b, c)
    assert_gemm_close(c, a, b)
