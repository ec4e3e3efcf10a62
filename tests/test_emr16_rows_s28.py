"""Session 28's many-core plans (issue 14), measured on the 16-core Emerald Rapids host
(benchmarks/recorded/issue14-emr16-rows-session28.txt): a tall f32 product with N = 64 and a
streamed A takes one 6 x 64 column tile (A read once) instead of two 12 x 32; the unpacked tile walk
of a batch of products takes 4 shares a thread like one product's. The planner's choices are read
through coopjit.cross_compile for that host (2-D products) and from this machine's planner with a
pool of 16 (batches: cross_compile takes 2-D operands only); every product is checked against NumPy
in float64 with the plans forced to 16 workers here."""
import numpy as np
import pytest

import coopjit
from coopjit import _core
from coopjit._arrays import gemm_types
from conftest import planned

HOST = "emeraldrapids"
WIDE = coopjit.cpu_info()["vector_bytes"] >= 64  # (the rule is for AVX-512's 32 registers)


def plan_here(a, b, plan=None):
    types, dt = gemm_types(a.dtype, b.dtype)
    c = np.empty(a.shape[:-1] + (b.shape[-1],), dt)
    return _core.gemm_plan(a, b, c, False, list(types), coopjit._kernel_args._overrides(plan) if plan else {})


def check(a, b, got):
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    eps = np.finfo(a.dtype).eps
    bound = 4 * a.shape[-1] * eps * np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert got.shape == ref.shape and np.all(np.abs(got - ref) <= bound), np.max(np.abs(got - ref) - bound)


# ---- N = 64 of a streamed A: one 4-vector column tile on many cores


def test_tall_product_of_64_columns_takes_one_column_tile_on_many_cores():
    cfg = planned(4096, 64, 4096, cpu=HOST)
    assert (cfg["order"], cfg["pack"], cfg["mr"], cfg["nr"], cfg["shares"], cfg["threads"]) == \
        ("m_inner", False, 6, 64, 4, 16), cfg
    assert planned(2000, 64, 1000, cpu=HOST)["nr"] == 64  # A of 8 MB streams
    # few cores keep two 2-vector tiles (a Zen 5 thread measured four vectors slower)
    for cpu, threads in (("znver5", 2), ("znver4", 2), (HOST, 4)):
        z = planned(4096, 64, 4096, cpu=cpu, threads=threads)
        assert (z["mr"], z["nr"]) != (6, 64) and z["nr"] < 64, (cpu, threads, z)
    # not other widths, not f64, not an A that stays in L2, not a named tile
    assert planned(4096, 48, 4096, cpu=HOST)["nr"] == 48
    # short A (a few tiles a worker: unmeasured) keeps the rule above: 256x64x8192
    assert planned(256, 64, 8192, cpu=HOST)["nr"] == 32
    assert planned(1535, 64, 4096, cpu=HOST)["nr"] == 32 and planned(1536, 64, 4096, cpu=HOST)["nr"] == 64
    assert planned(4096, 32, 4096, np.float64, cpu=HOST)["nr"] < 32
    assert planned(4096, 64, 4096, cpu=HOST, plan={"mr": 12, "nr": 32})["nr"] == 32
    # main's tile of the same shape on the same host (the A/B's "main" plan), for the record
    old = planned(4096, 64, 4096, cpu=HOST, plan={"mr": 12, "nr": 32})
    assert (old["mr"], old["shares"]) == (12, 4), old


@pytest.mark.parametrize("m,k", [(4096, 600), (1543, 1300), (2003, 2049)])
def test_tall_products_of_64_columns_on_16_workers_match_numpy(rng, pool, m, k):
    pool(16)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, 64)).astype(np.float32)
    cfg = plan_here(a, b)
    if WIDE:
        assert (cfg["mr"], cfg["nr"], cfg["order"]) == ("6", "64", "m_inner"), cfg
    got = coopjit.matmul(a, b)
    check(a, b, got)
    # a strided view of A and C written through out= (the same walk, other strides)
    av = np.asarray(rng.standard_normal((m, 2 * k)).astype(np.float32))[:, ::2]
    out = np.full((m, 64), np.nan, np.float32)
    coopjit.matmul(av, b, out=out)
    check(av, b, out)


# ---- shares of the tile walk over a batch


# (the first two past 50 MFLOP a worker: 4 shares a thread; the others one share)
BATCHES = [(8, 512, 512, 512), (3, 1400, 130, 900), (5, 1001, 67, 333), (16, 256, 96, 700)]


@pytest.mark.parametrize("batch,m,n,k", BATCHES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_batch_of_products_on_many_cores_takes_shares_and_matches_numpy(rng, pool, batch, m, n, k, dtype):
    pool(16)
    a = rng.standard_normal((batch, m, k)).astype(dtype)
    b = rng.standard_normal((batch, k, n)).astype(dtype)
    cfg = plan_here(a, b)
    tiles = -(-m // int(cfg["mr"])) * batch
    assert (cfg["order"], cfg["pack"], cfg["split"], cfg["threads"]) == ("m_inner", "false", "dp", "16"), cfg
    many = tiles >= 4 * 4 * 16 and 2.0 * batch * m * n * k >= 5.0e7 * 16
    # (session 29: 2 shares from 50 MFLOP in all and 2 row tiles a share, f32 on AVX-512, K >= 128)
    some = (WIDE and dtype == np.float32 and tiles >= 2 * 2 * 16 and 2.0 * batch * m * n * k >= 5.0e7 and
            min(m, n) >= 32 and k >= 128)
    assert cfg["shares"] == ("4" if many else "2" if some else "1"), cfg
    check(a, b, coopjit.matmul(a, b))
    # a broadcast B (one matrix for every product) and a transposed view of A
    b1 = rng.standard_normal((k, n)).astype(dtype)
    at = np.ascontiguousarray(rng.standard_normal((batch, k, m)).astype(dtype)).transpose(0, 2, 1)
    check(at, b1, coopjit.matmul(at, b1))


def test_batch_shares_stay_off_where_named_or_small(pool):
    pool(16)
    a = np.zeros((8, 512, 512), np.float32)
    assert plan_here(a, a)["shares"] == "4"
    assert plan_here(a, a, {"shares": 1})["shares"] == "1"
    small = np.zeros((4, 64, 64), np.float32)
    assert plan_here(small, small)["shares"] == "1"  # (under 50 MFLOP a worker)
    pool(2)
    assert plan_here(a, a)["shares"] == "1"  # few cores: one share a worker as before
