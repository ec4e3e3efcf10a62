"""K split on the unpacked tile walk (issue 14, session 27): plan ksplit with order='m_inner' runs
each part of K as the tile walk over all of C (a tile's sums in registers down the part's K), part
0 into C with beta, the others into zeroed blocks the caller adds. The many-core planner takes it
for the K split of blocks of at most 64 x 64 that are four vectors wide or more on AVX-512 (6 x 4
vector tiles: 64x64x8192 f32 / f64 on the 16-core Emerald Rapids host); wider blocks keep the
k_outer walk, and so do the 2-core plans. Plans are read through coopjit.cross_compile; every
product is checked against NumPy in float64 (int64 for int8: exact), with odd sizes, K remainders,
parts above the threads (shares), 2 / 3 / 16 workers through plan= threads, alpha / beta into a
strided view, transposed operands. Seeds: the rng fixture."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import check_scaled_product as _check, planned

HOST = "emeraldrapids"
KEYS = ("order", "mr", "nr", "ksplit", "threads", "split", "pack")


def _plan(ksplit, threads, **kw):
    return {"order": "m_inner", "pack": 0, "ksplit": ksplit, "threads": threads, **kw}


# --- the planner --------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,dtype,nr", [(64, 64, np.float32, 64), (48, 64, np.float32, 64),
                                          (64, 64, np.float64, 32), (64, 32, np.float64, 32)])
def test_host_splits_small_blocks_on_the_tile_walk(m, n, dtype, nr):
    cfg = planned(m, n, 8192, dtype, cpu=HOST)
    assert tuple(cfg[x] for x in KEYS) == ("m_inner", 6, nr, 16, 16, "dp", False), cfg


@pytest.mark.parametrize("m,n,k,dtype", [(64, 128, 8192, np.float32), (128, 128, 4096, np.float32),
                                         (32, 32, 16384, np.float32), (16, 16, 65536, np.float32),
                                         (64, 16, 8192, np.float64)])
def test_wider_or_narrower_blocks_keep_k_outer(m, n, k, dtype):
    cfg = planned(m, n, k, dtype, cpu=HOST)
    assert (cfg["order"], cfg["ksplit"]) == ("k_outer", 16), cfg


def test_other_machines_and_named_walks_keep_their_plans():
    # AVX2 (16 vector registers: no 6 x 4-vector tile): no tile walk split
    cfg = planned(64, 64, 8192, cpu="haswell")
    assert not (cfg["order"] == "m_inner" and cfg["ksplit"] > 1), cfg
    # the 2-core Zen 5's plan has no K split
    assert planned(64, 64, 8192, cpu="znver5", threads=2)["ksplit"] == 0
    # a named walk or tile is kept
    assert planned(64, 64, 8192, cpu=HOST, plan={"order": "k_outer", "ksplit": 16})["order"] == "k_outer"
    assert planned(64, 64, 8192, cpu=HOST, plan={"mr": 8})["ksplit"] == 0
    # b_prefetch is a field of the k_outer walk: a plan naming it keeps that walk's split
    cfg = planned(64, 64, 8192, cpu=HOST, plan={"b_prefetch": 1024})
    assert (cfg["order"], cfg["ksplit"], cfg["b_prefetch"]) == ("k_outer", 16, 1024), cfg
    # ksplit named without a walk on a packed plan is refused naming the k_outer walk, as before
    with pytest.raises(ValueError, match="ksplit=2 is a launch of the k_outer walk .order='k_outer'.; the plan's walk is m_in"):
        coopjit.matmul(np.ones((300, 300), np.float32), np.ones((300, 300), np.float32), plan={"ksplit": 2})


def test_tile_walk_ksplit_refusals_name_the_values():
    a, b = np.ones((40, 600), np.float32), np.ones((600, 30), np.float32)
    with pytest.raises(ValueError, match="ksplit=3 runs each K range.*split='dp' \\(got 'sk\\+dp'\\)"):
        coopjit.matmul(a, b, plan=_plan(3, 3, split="sk+dp"))
    with pytest.raises(ValueError, match="ksplit=2 with order='m_inner'.*got pack=1"):
        coopjit.matmul(a, b, plan=_plan(2, 2, pack=1))
    with pytest.raises(ValueError, match="ksplit=2 with order='m_inner'.*an epilogue"):
        coopjit.matmul(a, b, bias=np.ones(30, np.float32), plan=_plan(2, 2))
    h = ml_dtypes.bfloat16
    with pytest.raises(ValueError, match="ksplit=2 with order='m_inner'.*C bf16"):
        coopjit.matmul(a.astype(h), b.astype(h), plan=_plan(2, 2))
    with pytest.raises(ValueError, match="ksplit=2 with order='m_inner'.*a batch of 3"):
        coopjit.matmul(np.ones((3, 40, 600), np.float32), b, plan=_plan(2, 2))


# --- the products -------------------------------------------------------------------------------

@pytest.mark.parametrize("threads,ksplit", [(2, 2), (3, 5), (16, 16), (3, 16)])
@pytest.mark.parametrize("m,n", [(2, 3), (7, 33), (37, 70), (64, 64)])
@pytest.mark.parametrize("k", [1000, 2053])
def test_f32_blocks(rng, threads, ksplit, m, n, k):
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    plan = _plan(ksplit, threads)
    cfg = coopjit.compile_gemm(m, n, k, np.float32, plan=plan).config
    assert (int(cfg["ksplit"]), int(cfg["threads"]), cfg["order"]) == (ksplit, threads, "m_inner"), cfg
    _check(coopjit.matmul(a, b, plan=plan), a, b)


@pytest.mark.parametrize("m,n,k,pad", [(64, 64, 8192, 0), (64, 64, 8192, 16), (61, 50, 4099, 3), (6, 64, 300, 0)])
def test_host_plan_on_16_workers(rng, m, n, k, pad):
    # the host's plan (6 x 64 tiles, 16 parts) through plan= threads; A's rows 32 KiB apart or not
    a = rng.uniform(-1, 1, (m, k + pad)).astype(np.float32)[:, :k]
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    try:
        got = coopjit.matmul(a, b, plan=_plan(16, 16, mr=6, nr=64))
    except ValueError as e:  # a register tile this machine's vectors cannot hold
        pytest.skip(f"the host's tile does not fit this CPU: {e}")
    _check(got, a, b)


# float64 and exact int8 blocks: test_ksplit_mn_s26.py runs them on both walks.


def test_more_parts_than_k_tiles(rng):
    # K of 40 in 16 parts: as many parts as whole K tiles give (the others none)
    a = rng.uniform(-1, 1, (20, 40)).astype(np.float32)
    b = rng.uniform(-1, 1, (40, 70)).astype(np.float32)
    _check(coopjit.matmul(a, b, plan=_plan(16, 16, kt=4)), a, b)


# alpha / beta into a strided view and transposed / strided operands: test_ksplit_mn_s26.py runs
# them on both walks.


def test_same_sums_as_k_outer_split(rng):
    # both walks sum each part's K in order and add the parts in the same order
    a = rng.uniform(-1, 1, (64, 8192)).astype(np.float32)
    b = rng.uniform(-1, 1, (8192, 64)).astype(np.float32)
    x = coopjit.matmul(a, b, plan=_plan(4, 4))
    y = coopjit.matmul(a, b, plan={"order": "k_outer", "pack": 0, "ksplit": 4, "threads": 4})
    _check(x, a, b, rtol=2e-6)
    _check(y, a, b, rtol=2e-6)
