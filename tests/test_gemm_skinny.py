"""Skinny products and matrix-vector products (issue 14): the plans of their own, "dot" (the
kernel's N is 1: A's rows stream once, reduced along K) and "k_outer" (M up to 64 rows, long K:
the blocked nest straight from A and B), against NumPy in float64 (exact integers), for every
input type that reaches them, with alpha / beta, transposes, strided outputs and several worker
counts."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16
FLOATS = [np.float32, np.float64, np.float16, BF16]
INTS = [(np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)]


def _operands(rng, dtype, shape_a, shape_b):
    if np.issubdtype(np.dtype(dtype), np.integer):
        info = np.iinfo(dtype)
        return (rng.integers(info.min, info.max + 1, shape_a).astype(dtype),
                rng.integers(info.min, info.max + 1, shape_b).astype(dtype))
    return rng.uniform(-1, 1, shape_a).astype(dtype), rng.uniform(-1, 1, shape_b).astype(dtype)


def _check_float(c, a, b, c_type=None):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    mag = np.abs(a64) @ np.abs(b64)
    k = a.shape[-1]
    acc_eps = np.finfo(np.float64 if a.dtype == np.float64 else np.float32).eps
    out_eps = np.finfo(c.dtype).eps if c.dtype != BF16 else 2.0**-8
    err = np.abs(c.astype(np.float64) - ref)
    assert np.all(err <= (k + 2) * acc_eps * mag + out_eps * np.abs(ref) + 1e-30), err.max()


def _order(m, n, k, dtype=np.float32, **kw):
    return coopjit.compile_gemm(m, n, k, dtype, **kw).config["order"]


XEONS = ("sapphirerapids", "emeraldrapids", "graniterapids")


def _xeon_few_core_rows(cfg, cpu, threads, m, n, k, esize, avx512=True):
    # The planner's rule for Intel's 2 MiB-L2 Xeons below 8 cores (session 34): float products of
    # more than two row tiles and up to 512 rows over a B (K x N, both 256 or more) larger than the
    # L2 are packed, B by its reader, instead of the unpacked walks (AVX-512 only).
    return (cpu in XEONS and threads < 8 and avx512 and 2 * int(cfg["mr"]) < m <= 512 and n >= 256 and k >= 256 and
            k * n * esize > 2 << 20)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,k", [(8, 65), (257, 1000), (1001, 4097), (64, 64 * 3 + 5)])
def test_matrix_vector_floats(rng, dtype, m, k):
    a, x = _operands(rng, dtype, (m, k), (k, 1))
    c = coopjit.matmul(a, x)
    assert c.shape == (m, 1)
    _check_float(c, a, x)
    v = coopjit.matmul(a, x[:, 0])  # a 1-D vector
    assert v.shape == (m,)
    np.testing.assert_array_equal(v, c[:, 0])


@pytest.mark.parametrize("ta,tb", INTS)
def test_matrix_vector_integers_exact(rng, ta, tb):
    a, _ = _operands(rng, ta, (300, 2051), (1, 1))
    _, x = _operands(rng, tb, (1, 1), (2051, 1))
    c = coopjit.matmul(a, x)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ x.astype(np.int64))


def test_matrix_vector_takes_the_dot_plan():
    assert _order(4096, 1, 4096) == "dot"
    assert _order(100, 1, 3000, np.float64) == "dot"
    assert _order(1, 4096, 4096, trans_a=True, trans_b=True) == "dot"  # C^T = B^T A^T: the kernel's N is 1
    assert _order(4096, 4, 4096) != "dot"  # four columns: a GEMM tile
    assert _order(4096, 1, 4096, trans_a=True) != "dot"  # A's rows are strided along K


def test_matrix_vector_takes_every_core_of_a_many_core_host():
    # The dot walk on 16 cores: one worker a core (the call lasts as long as the slowest share), at
    # least 64 KiB of A a worker; few cores keep their count.
    def threads(m, k, dtype=np.float32, cpu_threads=16):
        a, x = np.ones((m, k), dtype), np.ones((k, 1), dtype)
        cfg = coopjit.cross_compile(a, x, cpu="sapphirerapids", threads=cpu_threads, code=False)["config"]
        assert cfg["order"] == "dot", cfg
        return int(cfg["threads"])
    assert threads(4096, 4096) == 16
    assert threads(16384, 4096) == 16
    assert threads(2048, 2048) == 16
    assert threads(1000, 300, np.float64) == 16  # 2.4 MB of A: 150 KB a worker
    assert threads(256, 256) == 4  # 256 KiB of A: 64 KiB a worker
    assert threads(40, 4096) == 10  # 10 row tiles of 4
    assert threads(4096, 4096, cpu_threads=2) == 2
    assert threads(4096, 4096, cpu_threads=8) == 8


@pytest.mark.parametrize("threads", [1, 2, 3, 7, 16])
def test_matrix_vector_alpha_beta_strided_output(rng, threads):
    m, k = 203, 777
    a, x = _operands(rng, np.float32, (m, k), (k, 1))
    c0 = rng.uniform(-1, 1, (m, 3)).astype(np.float32)
    c = c0.copy()
    coopjit.gemm(a, x, c[:, 1:2], alpha=1.5, beta=-0.5, plan={"threads": threads, "order": "dot"})
    ref = 1.5 * (a.astype(np.float64) @ x) - 0.5 * c0[:, 1:2]
    np.testing.assert_allclose(c[:, 1:2], ref, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(c[:, [0, 2]], c0[:, [0, 2]])  # the other columns untouched


def test_vector_matrix_through_the_transposed_orientation(rng):
    # (1 x K) times a column-major K x N: the kernel computes C^T = B^T a^T, N = 1 there.
    a = rng.uniform(-1, 1, (1, 1500)).astype(np.float32)
    b = np.asfortranarray(rng.uniform(-1, 1, (1500, 300)).astype(np.float32))
    c = coopjit.matmul(a, b)
    _check_float(c, a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(1, 1100, 2000), (1, 4096, 515), (16, 513, 1030), (64, 260, 4100), (33, 256, 700)])
def test_skinny_k_outer_floats(rng, dtype, m, n, k):
    a, b = _operands(rng, dtype, (m, k), (k, n))
    cfg = coopjit.compile_gemm(m, n, k, dtype).config
    threads = coopjit.get_num_threads()
    # (the few-row rule of the 2 MiB-L2 Xeons packs some of these: there the default is checked and
    # the k_outer walk is asked for by name)
    info = coopjit.cpu_info()
    few = _xeon_few_core_rows(cfg, info["name"], threads, m, n, k, np.dtype(dtype).itemsize, info["vector_bytes"] == 64)
    assert cfg["order"] == ("m_inner" if few else "k_outer"), cfg
    assert (cfg["pack"] and cfg["inline_b"]) == few, cfg
    for plan in [None] + ([{"order": "k_outer"}] if few else []):
        c0 = rng.uniform(-1, 1, (m, n)).astype(dtype)
        c = c0.copy()
        coopjit.gemm(a, b, c, alpha=0.75, beta=2.0, plan=plan)
        ref = 0.75 * (a.astype(np.float64) @ b) + 2.0 * c0
        mag = 0.75 * (np.abs(a.astype(np.float64)) @ np.abs(b)) + 2.0 * np.abs(c0)
        assert np.all(np.abs(c - ref) <= (k + 4) * np.finfo(dtype).eps * mag), plan


@pytest.mark.parametrize("threads", [1, 2, 5])
@pytest.mark.parametrize("kt", [4, 64, 1000])
def test_skinny_k_outer_plans_and_integers(rng, threads, kt):
    a, b = _operands(rng, np.int8, (7, 1001), (1001, 333))
    c = coopjit.matmul(a, b, plan={"order": "k_outer", "threads": threads, "kt": kt // 4 * 4})
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))
    a, b = _operands(rng, np.float32, (5, 300), (300, 1000))
    c = coopjit.matmul(a, b, plan={"order": "k_outer", "threads": threads, "kt": kt // 4 * 4})
    _check_float(c, a, b)


def test_low_precision_skinny_shapes(rng):
    for m, n, k in [(1, 700, 2000), (16, 300, 1200), (64, 300, 1200)]:
        a, b = _operands(rng, BF16, (m, k), (k, n))
        _check_float(coopjit.matmul(a, b), a, b)
        a, b = _operands(rng, np.int8, (m, k), (k, n))
        np.testing.assert_array_equal(coopjit.matmul(a, b), a.astype(np.int64) @ b.astype(np.int64))


def test_bad_order_overrides():
    a = np.ones((64, 300), np.float32)
    with pytest.raises(ValueError, match="order='dot' needs matrix-vector products"):
        coopjit.matmul(a, np.ones((300, 5), np.float32), plan={"order": "dot"})
    with pytest.raises(ValueError, match="k_outer.*needs pack=0"):
        coopjit.matmul(a, np.ones((300, 300), np.float32), plan={"order": "k_outer", "pack": True})
    with pytest.raises(ValueError, match="plan order must be one of m_inner, k_outer, dot"):
        coopjit.matmul(a, np.ones((300, 5), np.float32), plan={"order": "zigzag"})
    # bf16 C: the partial sums in a scratch matrix (session 20; refused before)
    c = coopjit.matmul(a.astype(BF16), np.ones((300, 300), BF16), plan={"order": "k_outer", "pack": False, "kt": 64})
    np.testing.assert_array_equal(c.astype(np.float64), np.full((64, 300), 300.0))


@pytest.mark.parametrize("threads,grid_m", [(4, 2), (6, 4), (3, 4), (7, 2), (16, 16), (5, 1000), (8, 1), (16, 0), (12, 0),
                                            (7, 0)])
def test_packed_nest_on_a_grid_of_workers(rng, threads, grid_m):
    # Every block of C is written exactly once whatever the grid (idle workers past gm x gn).
    m, n, k = 203, 389, 301
    for dtype in (np.float32, BF16, np.int8):
        a, b = _operands(rng, dtype, (m, k), (k, n))
        plan = {"pack": True, "threads": threads, "grid_m": grid_m, "kt": 128}
        assert coopjit.compile_gemm(m, n, k, dtype, plan=plan).config["grid_m"] == grid_m
        c = coopjit.matmul(a, b, plan=plan)
        if dtype == np.int8:
            np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))
        else:
            _check_float(c, a, b)
    a, b = _operands(rng, np.float64, (m, k), (k, n))
    c0 = rng.uniform(-1, 1, (m, n))
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-1.25, beta=0.5, plan={"pack": True, "threads": threads, "grid_m": grid_m, "kt": 64})
    np.testing.assert_allclose(c, -1.25 * (a @ b) + 0.5 * c0, rtol=1e-12, atol=1e-12)


def test_grid_is_chosen_at_run_time_and_the_code_serves_every_size():
    # (the nest's form named: on a pool of 8+ the planner's shares / nc_tiles rules differ by size)
    # (and inline_b: the 2 MiB-L2 Xeons below 8 cores give 301x1500x700 B's packing by its reader)
    nest = {"threads": 16, "shares": 1, "nc_tiles": 0, "inline_b": 0}
    k1 = coopjit.compile_gemm(1024, 1024, 1024, np.float32, plan=nest)
    k2 = coopjit.compile_gemm(301, 1500, 700, np.float32, plan=nest)
    assert k1.config["pack"] is True and k1.config["grid_m"] == 0
    assert k1.source("ir") == k2.source("ir")
    assert "better" in k1.source("ir")  # the run-time choice of the grid
    # (rows of 4000 f32: on 8+ cores 4096-wide rows, 16 KiB apart, alias in L1 and pack instead)
    # (on a 16-core Xeon, named: this machine's own cores may take the few-core Xeons' packing)
    cfg = coopjit.cross_compile(np.ones((64, 4000), np.float32), np.ones((4000, 4000), np.float32), cpu="emeraldrapids",
                                threads=16, code=False)["config"]
    assert cfg["order"] == "k_outer", cfg
    with pytest.raises(ValueError, match="grid_m=-1 is out of range"):
        coopjit.compile_gemm(64, 64, 64, np.float32, plan={"grid_m": -1})


# ---- one row of C with K split among the workers (plan ksplit)


def test_vector_matrix_splits_k_on_few_cores():
    a = np.ones((1, 4096), np.float32)
    b = np.ones((4096, 4096), np.float32)
    cfg = coopjit.cross_compile(a, b, cpu="znver5", threads=2, code=False)["config"]
    assert cfg["order"] == "k_outer" and cfg["ksplit"] == 2 and cfg["kt"] == 8, cfg
    assert coopjit.cross_compile(a, b, cpu="znver5", threads=16, code=False)["config"]["ksplit"] == 0  # not measured there
    assert coopjit.cross_compile(a, b, cpu="znver5", threads=1, code=False)["config"]["ksplit"] == 0
    assert coopjit.cross_compile(a[:, :300], b[:300], cpu="znver5", threads=2, code=False)["config"]["ksplit"] == 0  # short K


@pytest.mark.parametrize("cpu", ["emeraldrapids", "znver5"])
def test_vector_matrix_splits_k_on_many_cores_for_a_b_of_4_to_16_mib(cpu):
    # 8+ cores (session 34): f32 with B of 4-16 MiB and parts of 64 rows or more split K among all
    # the workers; bigger B, f64, short parts and fewer cores' rules as before.
    def cfg(n, k, threads=16, dtype=np.float32):
        return coopjit.cross_compile(np.ones((1, k), dtype), np.ones((k, n), dtype), cpu=cpu, threads=threads,
                                     code=False)["config"]
    for n, k in [(1024, 2048), (2048, 1024), (2048, 2048), (4096, 1024), (1024, 4096)]:
        for threads in (8, 16):
            c = cfg(n, k, threads)
            assert c["order"] == "k_outer" and int(c["ksplit"]) == threads == int(c["threads"]), (n, k, threads, c)
    for n, k, dtype in [(4096, 4096, np.float32), (2048, 4096, np.float32), (8192, 1024, np.float32),
                        (2048, 2048, np.float64), (1024, 2048, np.float64)]:
        assert int(cfg(n, k, dtype=dtype)["ksplit"]) == 0, (n, k, dtype)
    assert int(cfg(4096, 1024, threads=32)["ksplit"]) == 0  # parts of 32 rows
    assert int(cfg(4096, 4096, threads=2)["ksplit"]) == 2  # (the few-core rule)


@pytest.mark.parametrize("n,k", [(2048, 1024), (1024, 4100), (3000, 1500)])
def test_vector_matrix_k_split_on_sixteen_workers(rng, n, k):
    # The many-core plan (16 parts of 64-257 rows, K tiles of 8-32 rows, partial rows added by the
    # caller) run here on this machine's cores, with beta, against float64.
    a, b = _operands(rng, np.float32, (1, k), (k, n))
    c0 = rng.uniform(-1, 1, (1, n)).astype(np.float32)
    c = c0.copy()
    kern = coopjit.compile_gemm(1, n, k, np.float32, plan={"ksplit": 16, "threads": 16})
    assert int(kern.config["ksplit"]) == 16, kern.config
    coopjit.gemm(a, b, c, alpha=1.25, beta=-0.5, plan={"ksplit": 16, "threads": 16})
    ref = 1.25 * (a.astype(np.float64) @ b) - 0.5 * c0
    mag = 1.25 * (np.abs(a.astype(np.float64)) @ np.abs(b)) + 0.5 * np.abs(c0)
    assert np.all(np.abs(c - ref) <= (k + 4) * np.finfo(np.float32).eps * mag)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 3, 7, 33, 515, 2049])
@pytest.mark.parametrize("ksplit", [2, 3, 5])
def test_vector_matrix_k_split_sums_every_part(rng, dtype, k, ksplit):
    # K parts of whole K tiles (kt 8 here), the last one short or missing (k 1, 3, 7: one part).
    a, b = _operands(rng, dtype, (1, k), (k, 531))
    c = coopjit.matmul(a, b, plan={"order": "k_outer", "ksplit": ksplit, "kt": 8, "threads": 2})
    _check_float(c, a, b)


@pytest.mark.parametrize("beta", [0.0, -0.5, 1.0])
def test_vector_matrix_k_split_alpha_beta_strided_c(rng, beta):
    a, b = _operands(rng, np.float32, (1, 1999), (1999, 700))
    big = rng.uniform(-1, 1, (3, 1400)).astype(np.float32)
    c0 = big.copy()
    if beta == 0.0:
        big[1, ::2] = np.nan  # beta 0: C is not read, NaN there does not propagate
    coopjit.gemm(a, b, big[1:2, ::2], alpha=1.5, beta=beta, plan={"ksplit": 3, "order": "k_outer"})
    ref = 1.5 * (a.astype(np.float64) @ b) + (beta * c0[1:2, ::2] if beta else 0.0)
    np.testing.assert_allclose(big[1:2, ::2], ref, rtol=1e-5, atol=2e-4)
    np.testing.assert_array_equal(big[1, 1::2], c0[1, 1::2])  # the other columns and rows untouched
    np.testing.assert_array_equal(big[[0, 2]], c0[[0, 2]])


def test_vector_matrix_k_split_strided_operands(rng):
    a, b = _operands(rng, np.float32, (2, 3001), (3001, 900))
    got = coopjit.matmul(a[1:, ::-1], b[::-1, 100:700], plan={"ksplit": 2, "order": "k_outer"})
    _check_float(got, a[1:, ::-1].copy(), b[::-1, 100:700].copy())


def test_bad_ksplit_overrides():
    a, b = np.ones((1, 600), np.float32), np.ones((600, 300), np.float32)
    # (a fused epilogue applies once after the parts' sum since session 26: tests/test_ksplit_mn_s26.py)
    bias = np.arange(300, dtype=np.float32)
    np.testing.assert_array_equal(coopjit.matmul(a, b, bias=bias, plan={"ksplit": 2, "order": "k_outer"}), a @ b + bias)
    # (two rows of C split K too since session 26: tests/test_ksplit_mn_s26.py)
    a2 = np.ones((2, 600), np.float32)
    np.testing.assert_array_equal(coopjit.matmul(a2, b, plan={"ksplit": 2, "order": "k_outer"}), a2 @ b)
    # (the tile walk splits K too since session 27, without a fused epilogue: tests/test_ksplit_tile_walk_s27.py)
    np.testing.assert_array_equal(coopjit.matmul(a, b, plan={"ksplit": 2, "order": "m_inner"}), a @ b)
    with pytest.raises(ValueError, match="ksplit=2 with order='m_inner'.*no fused epilogue.*an epilogue"):
        coopjit.matmul(a, b, bias=bias, plan={"ksplit": 2, "order": "m_inner"})
    with pytest.raises(ValueError, match="ksplit=2 is a launch of the k_outer walk.*walk is dot"):
        coopjit.matmul(a, b, plan={"ksplit": 2, "order": "dot"})
    with pytest.raises(ValueError, match="ksplit=-1 is out of range"):
        coopjit.matmul(a, b, plan={"ksplit": -1})


@pytest.mark.parametrize("ahead", [0, 64, 1024, 8192])
@pytest.mark.parametrize("m,n,k", [(1, 1000, 777), (9, 333, 1001)])
def test_k_outer_prefetch_of_b(rng, ahead, m, n, k):
    # b_prefetch only adds prefetches (which never fault, past B's end too): the product is the
    # same for every distance, and the distance is part of the plan.
    a, b = _operands(rng, np.float32, (m, k), (k, n))
    plan = {"order": "k_outer", "b_prefetch": ahead}
    _check_float(coopjit.matmul(a, b, plan=plan), a, b)
    assert coopjit.compile_gemm(m, n, k, np.float32, plan=plan).config["b_prefetch"] == ahead
    assert _order(1, 4096, 4096) == "k_outer"
    # (the default below 8 workers; none on more, where it measured slower, nor on Zen 4 for one
    # row panel)
    want = 1024 if coopjit.get_num_threads() < 8 and coopjit.cpu_info()["name"] != "znver4" else 0
    assert coopjit.compile_gemm(1, 4096, 4096, np.float32).config["b_prefetch"] == want


@pytest.mark.parametrize("m,want_zen4", [(1, 0), (4, 0), (6, 0), (8, 1024), (16, 1024), (64, 1024)])
def test_k_outer_prefetch_rule_by_cpu(m, want_zen4):
    # On the 2-core Zen 4 the k_outer walk of one row panel (M up to mr) reads B without
    # prefetches (the hardware prefetchers follow its few rows; the prefetches measured slower);
    # two or more row panels, and other CPUs below 8 cores, prefetch 1 KiB ahead.
    a, b = np.ones((m, 4096), np.float32), np.ones((4096, 4096), np.float32)
    for threads in (1, 2):
        cfg = coopjit.cross_compile(a, b, cpu="znver4", threads=threads, code=False)["config"]
        assert cfg["order"] == "k_outer" and int(cfg["b_prefetch"]) == want_zen4, (threads, cfg)
        assert (int(cfg["mr"]) >= m) == (want_zen4 == 0), cfg
        for other in ("znver5", "sapphirerapids"):
            cfg = coopjit.cross_compile(a, b, cpu=other, threads=threads, code=False)["config"]
            if _xeon_few_core_rows(cfg, other, threads, m, 4096, 4096, 4):
                # (more than two row tiles on the Xeon: packed, B by its reader; no prefetches)
                assert m > 2 * int(cfg["mr"]) and cfg["pack"] and cfg["inline_b"], (other, threads, cfg)
                assert int(cfg["b_prefetch"]) == 0, (other, threads, cfg)
                continue
            assert cfg["order"] == "k_outer" and int(cfg["b_prefetch"]) == 1024, (other, threads, cfg)
    # 8 threads: none on any of them
    assert int(coopjit.cross_compile(a, b, cpu="znver4", threads=8, code=False)["config"]["b_prefetch"]) == 0


@pytest.mark.parametrize("m,n,k", [(1, 4096, 1500), (1, 1000, 4096), (3, 2000, 1111), (5, 777, 2048)])
def test_k_outer_one_row_panel_default(rng, m, n, k):
    # The default plan of one row panel (no prefetches on Zen 4, 1 KiB ahead elsewhere), one
    # worker and all of them, against NumPy in float64.
    a, b = _operands(rng, np.float32, (m, k), (k, n))
    threads = coopjit.get_num_threads()
    try:
        for t in sorted({1, threads}):
            coopjit.set_num_threads(t)
            assert _order(m, n, k) == "k_outer"
            _check_float(coopjit.matmul(a, b), a, b)
    finally:
        coopjit.set_num_threads(threads)


def test_bad_b_prefetch_overrides():
    a, b = np.ones((4, 600), np.float32), np.ones((600, 300), np.float32)
    with pytest.raises(ValueError, match="b_prefetch=100 must be a multiple of 64 bytes in \\[0, 8192\\]"):
        coopjit.matmul(a, b, plan={"order": "k_outer", "b_prefetch": 100})
    with pytest.raises(ValueError, match="b_prefetch=16384 must be"):
        coopjit.matmul(a, b, plan={"order": "k_outer", "b_prefetch": 16384})
    with pytest.raises(ValueError, match="b_prefetch=64 prefetches B's rows in the unpacked blocked nest .*m_inner"):
        coopjit.matmul(a, b, plan={"order": "m_inner", "b_prefetch": 64})


@pytest.mark.parametrize("threads", [2, 3, 7])
@pytest.mark.parametrize("m,n", [(513, 129), (7 * 6, 500), (6 * 6 + 1, 77), (30, 1000)])
def test_tile_walk_by_rows_covers_every_tile_once(rng, threads, m, n):
    # The data-parallel walk gives each worker its rows of every column panel when there are at
    # least as many row panels as workers (else blocks of the walk down M): edge tiles in M and N,
    # workers with one row panel, idle workers. Beta C shows a tile written twice or never.
    a, b = _operands(rng, np.float32, (m, 200), (200, n))
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=1.0, beta=0.5, plan={"threads": threads, "order": "m_inner", "pack": False})
    ref = a.astype(np.float64) @ b.astype(np.float64) + 0.5 * c0
    np.testing.assert_allclose(c, ref, rtol=2e-5, atol=2e-4)


@pytest.mark.parametrize("dtype,m,n,k", [(np.float32, 64, 64, 8192), (np.float32, 100, 32, 1024),
                                         (np.float64, 37, 16, 512), (np.float32, 64, 64, 1000)])
@pytest.mark.parametrize("threads", [1, 2])
def test_rows_of_a_4_kib_apart_take_at_most_8_rows_a_tile(rng, dtype, m, n, k, threads):
    # A's rows a multiple of 4 KiB apart (K of 1024 f32 / 512 f64) fall in one L1 set: on few
    # cores a tile reads at most 8 of them (Zen 4's L1 has 8 ways); other K keep the taller
    # tiles. The products match NumPy in float64, also through a transposed B and a sliced A.
    before = coopjit.get_num_threads()
    coopjit.set_num_threads(threads)
    try:
        a, b = _operands(rng, dtype, (m, k), (k, n))
        c = np.empty((m, n), dtype)
        plan = coopjit._core.gemm_plan(a, b, c, False, [{np.float32: "f32", np.float64: "f64"}[dtype]] * 3)
        aliased = k * np.dtype(dtype).itemsize % 4096 == 0
        if aliased:  # (threads < 8: the planner's worker pool is this small)
            assert int(plan["mr"]) <= 8, plan["mr"]
        else:
            assert int(plan["mr"]) > 8 or n > 32, plan["mr"]  # (the 2-vector tiles of narrow N keep 9-12 rows)
        _check_float(coopjit.matmul(a, b), a, b)
        _check_float(coopjit.matmul(a, np.asfortranarray(b)), a, b)
        wide = np.zeros((m, k + 1024 // np.dtype(dtype).itemsize), dtype)
        wide[:, :k] = a
        _check_float(coopjit.matmul(wide[:, :k], b), a, b)
    finally:
        coopjit.set_num_threads(before)


# ---- skinny products whose rows of B alias in L1 (many cores: B packed by its reader)


def test_skinny_products_with_b_rows_4k_apart_pack_b_on_many_cores():
    a = np.ones((64, 4096), np.float32)
    big = np.ones((4096, 4096), np.float32)
    for bb in (big, big[:, :3000]):  # rows 16 KiB apart, N whole or a view
        cfg = coopjit.cross_compile(a, bb, cpu="emeraldrapids", threads=16, code=False)["config"]
        assert cfg["pack"] and cfg["inline_b"] and cfg["order"] != "k_outer", cfg
        assert coopjit.cross_compile(a[:16], bb, cpu="emeraldrapids", threads=16, code=False)["config"]["inline_b"]
        # A's rows 16 KiB apart alias too
        assert coopjit.cross_compile(a, bb[:, :2500].copy(), cpu="emeraldrapids", threads=16, code=False)["config"]["inline_b"]
    # The unpacked k_outer walk stays: rows of A and B not 4 KiB multiples apart (or only 4 KiB),
    # one row tile (nothing reuses B), few cores (a Zen 5: the Xeon's own few-core rule packs them,
    # test_few_rows_over_a_wide_b_pack_on_the_few_core_xeons), a walk asked for; f64 rows alias at 2048 (16 KiB).
    a2 = np.ones((64, 4000), np.float32)
    for aa, bb, threads, cpu in ((a2, np.ones((4000, 4000), np.float32), 16, "emeraldrapids"),
                                 (a2, np.ones((4000, 1024), np.float32), 16, "emeraldrapids"),
                                 (a[:4], big, 16, "emeraldrapids"), (a, big, 2, "znver5"), (a[:4], big, 2, "emeraldrapids")):
        cfg = coopjit.cross_compile(aa, bb, cpu=cpu, threads=threads, code=False)["config"]
        assert cfg["order"] == "k_outer" and not cfg["pack"], (aa.shape, bb.shape, bb.strides, threads, cpu, cfg)
    cfg = coopjit.cross_compile(a, big, cpu="emeraldrapids", threads=16, plan={"order": "k_outer"}, code=False)["config"]
    assert cfg["order"] == "k_outer" and not cfg["pack"]
    cfg = coopjit.cross_compile(a.astype(np.float64), np.ones((4096, 2048)), cpu="emeraldrapids", threads=16, code=False)["config"]
    assert cfg["pack"] and cfg["order"] != "k_outer", cfg


def test_skinny_f64_products_of_64_rows_pack_b_by_its_reader_on_many_cores():
    # f64, 64 rows (13 row tiles of 5: 65 rows of 8 KiB at the packed K tile, over the 512 KiB
    # bound): B packed by its reader on 16 cores, in K tiles of 128 (32 KiB of a 32-column panel).
    a = np.ones((64, 4096))
    for n in (2048, 4096):
        cfg = coopjit.cross_compile(a, np.ones((4096, n)), cpu="sapphirerapids", threads=16, code=False)["config"]
        assert cfg["pack"] and cfg["inline_b"] and int(cfg["kt"]) == 128 and int(cfg["shares"]) == 1, cfg
    # More rows (A's slice over the bound, not skinny) and few cores keep their plans.
    cfg = coopjit.cross_compile(np.ones((128, 4096)), np.ones((4096, 2048)), cpu="sapphirerapids", threads=16, code=False)["config"]
    assert cfg["pack"] and not cfg["inline_b"], cfg
    cfg = coopjit.cross_compile(a, np.ones((4096, 2048)), cpu="znver5", threads=2, code=False)["config"]
    assert not cfg["inline_b"], cfg
    # (the Xeon below 8 cores: its few-row rule, K tiles of 128 as on many cores)
    cfg = coopjit.cross_compile(a, np.ones((4096, 2048)), cpu="sapphirerapids", threads=2, code=False)["config"]
    assert cfg["pack"] and cfg["inline_b"] and int(cfg["kt"]) == 128, cfg


@pytest.mark.parametrize("cpu", XEONS)
def test_few_rows_over_a_wide_b_pack_on_the_few_core_xeons(cpu):
    # The 2 MiB-L2 Xeons below 8 cores (session 34): float products of more than two row tiles and
    # up to 512 rows whose B (K x N, both 256 or more) outgrows the L2 pack, B by its reader; the
    # rest keep their walks, and the many-core plans and other CPUs are not touched.
    def cfg(m, n, k, threads=2, dtype=np.float32, c=cpu, **kw):
        return coopjit.cross_compile(np.ones((m, k), dtype), np.ones((k, n), dtype), cpu=c, threads=threads,
                                     code=False, **kw)["config"]
    for m, n, k, dtype in [(16, 4096, 4096, np.float32), (64, 4096, 1024, np.float32), (48, 1000, 1500, np.float32),
                           (128, 4096, 4096, np.float32), (512, 2048, 2048, np.float32), (64, 2048, 2048, np.float64),
                           (100, 2000, 2000, np.float32)]:
        for threads in (1, 2, 7):
            c = cfg(m, n, k, threads, dtype)
            assert c["pack"] and c["inline_b"] and c["order"] == "m_inner" and m > 2 * int(c["mr"]), (m, n, k, threads, c)
        z = cfg(m, n, k, 2, dtype, c="znver5")
        assert not z["inline_b"], (m, n, k, z)
    # Two row tiles or fewer, a narrow B, B within the L2, more than 512 rows, a short K: as before
    # (the unpacked walks; 1024^3 the packing phase).
    assert cfg(8, 4096, 4096)["order"] == "k_outer"
    assert not cfg(4096, 64, 4096)["pack"]
    assert not cfg(64, 512, 1024)["pack"]  # B 2 MiB: in the L2
    c = cfg(1024, 1024, 1024)
    assert c["pack"] and not c["inline_b"], c
    assert not cfg(64, 4096, 128)["pack"]
    # Asked-for forms stay: the k_outer walk, a packing phase, and 8+ cores go by the many-core rules.
    assert cfg(64, 4096, 4096, plan={"order": "k_outer"})["order"] == "k_outer"
    c = cfg(64, 4096, 4096, plan={"inline_b": 0})
    assert c["pack"] and not c["inline_b"], c
    c = cfg(128, 4096, 2048, threads=16)
    assert c["pack"] and not c["inline_b"], c


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m, n", [(64, 3000), (17, 2048), (40, 1050)])
def test_skinny_products_packing_b_by_its_reader(rng, threads, m, n, dtype):
    # The plan the many-core planner picks (pack, inline_b), run here against float64 on B views
    # whose rows are 16 KiB apart, with beta and a strided C (f64: 64 rows in 13 tiles of 5).
    a, big = _operands(rng, dtype, (m, 1100), (1100, 4096))
    b = big[:, 7:7 + n]
    c0 = rng.uniform(-1, 1, (m, 2 * n)).astype(dtype)
    c = c0.copy()
    coopjit.gemm(a, b, c[:, ::2], alpha=1.5, beta=-0.5, plan={"pack": 1, "inline_b": 1, "threads": threads})
    ref = 1.5 * (a.astype(np.float64) @ b.astype(np.float64)) - 0.5 * c0[:, ::2]
    mag = 1.5 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) + 0.5 * np.abs(c0[:, ::2])
    assert np.all(np.abs(c[:, ::2] - ref) <= 1102 * np.finfo(dtype).eps * mag)
    assert np.array_equal(c[:, 1::2], c0[:, 1::2])  # the other columns untouched
