"""Many-core plans for small and skinny products (issue 14, session 17): every core from 1.5 MFLOP
on 8+ cores, skinny AMX products packing B by its reader (inline_b) on 8+ cores, and the pool's
threads spinning while their launch runs (thread_pool.cpp's kHold). The planner's choices are read
through coopjit.cross_compile for a 16-core Sapphire Rapids and from this machine's planner with a
pool of 8 or 16; every product is checked against NumPy in float64 / int64."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import planned

BF16 = ml_dtypes.bfloat16
WIDE = coopjit.cpu_info()["vector_bytes"] >= 64  # (the AMX emulation needs AVX-512 vectors)


def work_units(cfg, m, n, k):
    """Output tiles times K tiles: the most workers a plan may take."""
    return -(-m // cfg["mr"]) * -(-n // cfg["nr"]) * -(-k // cfg["kt"])


@pytest.mark.parametrize("m,n,k", [(100, 37, 250), (64, 64, 200), (128, 128, 64), (96, 96, 90), (96, 96, 64)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_products_take_every_core_of_a_many_core_host(m, n, k, dtype):
    flops = 2.0 * m * n * k
    assert 1.0e6 <= flops < 4.0e6  # the range where few cores take 1 or 2 workers
    cfg = planned(m, n, k, dtype)
    assert cfg["threads"] == min(16, work_units(cfg, m, n, k)) and cfg["threads"] > 2, cfg
    assert cfg["split"] == "dp", cfg  # any thread takes any share: no Stream-K waits
    cfg8 = planned(m, n, k, dtype, threads=8)
    assert (cfg8["threads"], cfg8["split"]) == (min(8, work_units(cfg, m, n, k)), "dp"), cfg8
    # few cores: 2 workers from 1.5 MFLOP, one below; below 1 MFLOP one worker on any host
    few = 2 if flops >= 1.5e6 else 1
    assert planned(m, n, k, dtype, threads=4, cpu="znver4")["threads"] == few
    assert planned(m, n, k, dtype, threads=7, cpu="znver4")["threads"] == few
    assert planned(64, 64, 64, dtype)["threads"] == 1
    # from 4 MFLOP the earlier rule: every core, Stream-K where the tiles are few
    big = planned(128, 128, 160, dtype)
    assert big["threads"] == min(16, work_units(big, 128, 128, 160)), big


@pytest.mark.parametrize("threads,cpu", [(16, "sapphirerapids"), (2, "znver4")])
def test_a_plan_asking_to_pack_takes_the_packed_split(threads, cpu):
    """pack=1 on a few-tile product gets the packed plans' data-parallel split unless the plan
    names one (on 16 cores it kept Stream-K, which inline_b=1 then refused)."""
    cfg = planned(37, 300, 1001, np.float32, threads=threads, cpu=cpu, plan={"pack": 1})
    assert (cfg["pack"], cfg["split"]) == (True, "dp"), cfg
    cfg = planned(37, 300, 1001, np.float32, threads=threads, cpu=cpu, plan={"pack": 1, "inline_b": 1})
    assert (cfg["pack"], cfg["split"], cfg["inline_b"]) == (True, "dp", True), cfg
    cfg = planned(37, 300, 1001, np.float32, threads=threads, cpu=cpu, plan={"pack": 1, "split": "sk"})
    assert cfg["split"] == "sk", cfg


@pytest.mark.parametrize("m,n,k", [(100, 37, 250), (64, 64, 200), (128, 128, 64), (33, 130, 180), (96, 96, 64)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_products_on_sixteen_workers_match_numpy(rng, pool, m, n, k, dtype):
    pool(16)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    cfg = coopjit.compile_gemm(m, n, k, dtype).config
    assert cfg["threads"] == min(16, work_units(cfg, m, n, k)) and cfg["threads"] > 2 and cfg["split"] == "dp", cfg
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 8 * np.sqrt(k) * np.finfo(dtype).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    for _ in range(3):  # back to back, the pool's threads still spinning
        assert np.all(np.abs(coopjit.matmul(a, b) - ref) <= tol)
    out = np.full((m, n), np.nan, dtype)
    assert np.all(np.abs(coopjit.matmul(a, b, out=out) - ref) <= tol)
    c = rng.standard_normal((m, n)).astype(dtype)
    got = coopjit.gemm(a, b, c.copy(), alpha=0.5, beta=-2.0)
    assert np.all(np.abs(got - (0.5 * ref - 2.0 * c)) <= tol + 4 * np.finfo(dtype).eps * np.abs(2.0 * c))


@pytest.mark.parametrize("dtype,kt", [(np.int8, 1024), (BF16, 512)])
def test_skinny_amx_products_pack_b_by_their_reader_on_many_cores(dtype, kt):
    cfg = planned(64, 4096, 4096, dtype)
    # (A is read where it is when its rows are up to 4 KiB: int8 here, not bf16's 8 KiB rows)
    direct = np.dtype(dtype).itemsize * 4096 <= 4096
    assert (cfg["amx"], cfg["inline_b"], cfg["direct_a"], cfg["grid_m"], cfg["kt"]) == ("yes", True, direct, 1, kt), cfg
    assert cfg["split"] == "dp" and cfg["threads"] == 16, cfg
    # K not a whole number of tile steps: A packed, B still by its reader
    cfg = planned(64, 4096, 4000, dtype)
    assert (cfg["amx"], cfg["inline_b"], cfg["direct_a"]) == ("yes", True, False), cfg
    # (fewer than 64 rows take tiles only when asked: the vector plans' skinny walks otherwise)
    assert planned(16, 2048, 1024, dtype, plan={"amx": 1})["inline_b"] is True
    # few cores too (session 33: measured on 2; 3-7 lie between the two measured ends)
    assert planned(64, 4096, 4096, dtype, threads=2)["inline_b"] is True
    assert planned(64, 4096, 4096, dtype, threads=7)["inline_b"] is True
    # not skinny (65+ rows; on few cores too), too few column panels for the workers, a prepacked B: a packing launch
    assert planned(128, 4096, 4096, dtype)["inline_b"] is False
    assert planned(128, 4096, 4096, dtype, threads=2)["inline_b"] is False
    assert planned(96, 4096, 1024, dtype)["inline_b"] is False
    assert planned(64, 256, 4096, dtype)["inline_b"] is False  # 8 column panels for 16 workers
    assert planned(64, 4096, 4096, dtype, plan={"inline_b": 0})["inline_b"] is False  # as asked
    assert planned(64, 4096, 4096, dtype, plan={"prepacked_b": 1, "pack": 1})["inline_b"] is False


def ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.skipif(not WIDE, reason="the AMX emulation needs AVX-512 vectors; this CPU (or COOPJIT_CPU_LEVEL) gives 32-byte ones")
@pytest.mark.parametrize("ta,tb", [(np.int8, np.int8), (np.uint8, np.int8), (BF16, BF16)])
@pytest.mark.parametrize("m,n,k", [(64, 512, 2048), (64, 300, 2100), (5, 257, 1100)])
def test_skinny_emulated_tile_products_the_planner_packs_inline_match_numpy(rng, pool, ta, tb, m, n, k):
    """The planner's own choice on an 8-worker pool (this machine's planner: 8+ workers count as
    many cores), with emulated tiles: B packed by its reader, A read where it is (whole tiles of
    rows and K) or packed; edges in M, N and K, several K tiles."""
    pool(8)
    plan = {"amx": "emulated"}
    if ta == BF16:
        a, b = rng.uniform(-2, 2, (m, k)).astype(BF16), rng.uniform(-2, 2, (k, n)).astype(BF16)
        out = np.float32
    else:
        a, b = ints(rng, ta, (m, k)), ints(rng, tb, (k, n))
        out = np.int32
    types = coopjit._arrays.gemm_types(a.dtype, b.dtype, np.dtype(out))[0]
    c = np.empty((m, n), out)
    cfg = coopjit._plan.from_core(coopjit._core.gemm_plan(a, b, c, False, types, coopjit._gemm._overrides(plan)))
    assert (cfg["amx"], cfg["inline_b"], cfg["split"], cfg["threads"]) == ("emulated", True, "dp", 8), cfg
    assert cfg["direct_a"] is (m % 32 == 0 and k % cfg["kb"] == 0), cfg
    assert -(-k // cfg["kt"]) >= 2, cfg  # several K tiles
    got = coopjit.matmul(a, b, out=c, plan=plan)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if ta == BF16:
        bound = (k + 2) * np.finfo(np.float32).eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
        assert np.all(np.abs(got - ref) <= bound)
    else:
        np.testing.assert_array_equal(got, ref.astype(np.int64))


@pytest.mark.skipif(not WIDE, reason="the AMX emulation needs AVX-512 vectors; this CPU (or COOPJIT_CPU_LEVEL) gives 32-byte ones")
def test_skinny_emulated_int8_product_with_a_fused_epilogue_packs_b_inline(rng, pool):
    """W8A8: int8 x int8 * a scale per column + a bias -> bfloat16, B packed by its reader."""
    pool(8)
    m, n, k = 64, 384, 1536
    a, b = ints(rng, np.int8, (m, k)), ints(rng, np.int8, (k, n))
    scale = rng.uniform(1e-3, 2e-3, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    kern = coopjit.compile_gemm(m, n, k, np.int8, plan={"amx": "emulated"}, scale=True, bias=True, out_dtype=BF16)
    assert (kern.config["amx"], kern.config["inline_b"]) == ("emulated", True), kern.config
    got = coopjit.matmul(a, b, scale=scale, bias=bias, out_dtype=BF16, plan={"amx": "emulated"})
    ref = (a.astype(np.float64) @ b.astype(np.float64)) * scale + bias
    assert got.dtype == BF16
    # one bfloat16 rounding of a float32 value
    assert np.all(np.abs(got.astype(np.float64) - ref) <= 2.0**-8 * np.abs(ref) + 1e-6 * np.abs(ref).max())


@pytest.mark.parametrize("hold", [True, False])
def test_launches_back_to_back_with_uneven_shares_match_numpy_with_and_without_the_hold(rng, pool, hold):
    """The pool's threads keep spinning while their launch runs (kHold) or wait as before; either
    way every kind of launch (independent shares, a packing barrier, shares handed out, a split K,
    reductions) gives NumPy's results, back to back and after pauses."""
    pool(2)  # no more workers than this machine's cores: the hold applies here
    coopjit._core._set_pool_hold(hold)
    try:
        problems = [(300, 64, 150, {}), (5, 40, 700, {}), (700, 300, 400, {"shares": 3}), (1, 4000, 3000, {"ksplit": 2}),
                    (400, 400, 300, {}), (1500, 1, 800, {})]
        for i in range(24):
            m, n, k, plan = problems[i % len(problems)]
            a = rng.standard_normal((m, k))
            b = rng.standard_normal((k, n))
            got = coopjit.matmul(a, b, plan=plan or None)
            np.testing.assert_allclose(got, a @ b, rtol=1e-10, atol=1e-10 * np.sqrt(k))
            x = rng.integers(-5, 6, (20_000 + i, 9)).astype(np.float32)
            np.testing.assert_array_equal(coopjit.reduce(x, 1), x.astype(np.float64).sum(axis=1))
            if i % 5 == 0:
                np.asarray(rng.standard_normal(10)).sum()  # (some Python between calls)
                import time
                time.sleep(0.002)  # past kSpin: the threads sleep
    finally:
        coopjit._core._set_pool_hold(True)


@pytest.mark.parametrize("dtype", [np.int8, BF16])
@pytest.mark.parametrize("threads,cpu", [(2, "znver4"), (16, "sapphirerapids")])
def test_skinny_products_with_dot_instructions_pack_from_four_rows(dtype, threads, cpu):
    for m in (4, 16, 48):
        cfg = planned(m, 4096, 4096, dtype, threads=threads, cpu=cpu)
        assert cfg["pack"] is True and cfg["vnni"] > 1, (m, cfg)
        assert planned(4096, m, 4096, dtype, threads=threads, cpu=cpu)["pack"] is True  # a few columns
    assert planned(1, 4096, 4096, dtype, threads=threads, cpu=cpu)["pack"] is False  # one row: unpacked
    assert planned(3, 4096, 4096, dtype, threads=threads, cpu=cpu)["pack"] is False
    # (the k_outer walk when asked for: unpacked; bf16 C through its scratch of partial sums)
    assert planned(16, 4096, 4096, dtype, threads=threads, cpu=cpu, plan={"order": "k_outer"})["pack"] is False
    assert planned(16, 4000, 4000, np.float32, threads=threads, cpu=cpu)["pack"] is False  # no dot instruction


@pytest.mark.parametrize("ta,tb", [(np.int8, np.int8), (np.uint8, np.int8), (BF16, BF16)])
@pytest.mark.parametrize("m,n,k", [(4, 700, 1500), (7, 333, 1001), (33, 520, 2100), (300, 5, 700)])
def test_skinny_products_with_dot_instructions_match_numpy(rng, ta, tb, m, n, k):
    if ta == BF16:
        a, b = rng.uniform(-2, 2, (m, k)).astype(BF16), rng.uniform(-2, 2, (k, n)).astype(BF16)
        got = coopjit.matmul(a, b, out=np.empty((m, n), np.float32))
        ref = a.astype(np.float64) @ b.astype(np.float64)
        bound = (k + 2) * np.finfo(np.float32).eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
        assert np.all(np.abs(got - ref) <= bound)
    else:
        a, b = ints(rng, ta, (m, k)), ints(rng, tb, (k, n))
        np.testing.assert_array_equal(coopjit.matmul(a, b), a.astype(np.int64) @ b.astype(np.int64))
    # strided views and a transposed B read the same way
    if ta != BF16:
        big = ints(rng, ta, (m, 2 * k))
        bt = ints(rng, tb, (n, k))
        np.testing.assert_array_equal(coopjit.matmul(big[:, ::2], bt.T),
                                      big[:, ::2].astype(np.int64) @ bt.T.astype(np.int64))


@pytest.mark.skipif(not WIDE, reason="the AMX emulation needs AVX-512 vectors")
@pytest.mark.parametrize("dtype", [BF16, np.int8])
@pytest.mark.parametrize("feed", [0, 1, 2])
def test_skinny_tiles_with_every_feed_on_a_many_core_pool(pool, dtype, feed):
    """The skinny rule's inline_b on a pool of 16 with each amx_feed: feed 2 reads B as whole 1 KiB
    tiles, which the reader's VNNI rows are not, so it keeps the packing phase (session 17: the
    pair gave wrong sums on the 16-core host); against NumPy in float64 / int64."""
    pool(16)
    rng = np.random.default_rng(feed)
    m, n, k = 64, 64, 64
    plan = {"amx": "emulated", "amx_feed": feed}
    if dtype == np.int8:
        a, b = rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)
        np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), a.astype(np.int64) @ b.astype(np.int64))
        cfg = coopjit.compile_gemm(m, n, k, np.int8, plan=plan).config
    else:
        a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        c = coopjit.matmul(a, b, out=np.empty((m, n), np.float32), plan=plan)
        assert np.max(np.abs(c - ref)) <= 1e-4 * (1 + np.max(np.abs(ref))), np.max(np.abs(c - ref))
        cfg = coopjit.compile_gemm(m, n, k, dtype, out_dtype=np.float32, plan=plan).config
    assert cfg["inline_b"] is (feed != 2), cfg
