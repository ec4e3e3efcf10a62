"""bf16 squares on few cores (issue 14, session 21): each worker packs its own copy of A (plan
own_a: one row of workers, no packing barrier, an independent launch), and a pool thread that starts
a launch on its caller's CPU moves to another CPU (thread_pool.cpp's spread). The plans through
cross_compile; own_a products against NumPy in float64 at M / N / K edges (K odd), strided and
transposed operands, alpha / beta, bf16 and f32 C, B packed by its reader or beforehand, 1-3
workers, a worker without column panels; its refusals; the spread of a pool thread pinned onto its
caller's CPU (a subprocess)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import coopjit
from gemm_reference import BF16, check_product, plan_config


def _cfg(m, n, k, cpu, dtype=BF16, threads=2, **kw):
    return plan_config(m, n, k, cpu, dtype, threads, **kw)


@pytest.mark.parametrize("cpu", ["znver4", "znver5"])
@pytest.mark.parametrize("n", [128, 256, 512, 1024])
def test_bf16_squares_on_two_workers_pack_their_own_a(cpu, n):
    cfg = _cfg(n, n, n, cpu)
    assert cfg["own_a"] is True and cfg["pack"] is True and cfg["grid_m"] == 1, cfg
    assert cfg["threads"] == 2 and cfg["shares"] == 1 and cfg["amx"] == "no", cfg


@pytest.mark.parametrize("cpu,threads,m,n,k,dtype", [
    ("znver4", 2, 2048, 2048, 2048, BF16),  # A's panels past 3 MiB: the shared packing
    ("znver4", 2, 4096, 4096, 4096, BF16),
    ("znver4", 1, 512, 512, 512, BF16),  # one worker
    ("znver4", 2, 512, 512, 512, np.float32),  # (not measured to gain: f32; int8 takes it since
    # session 26's measurement on Zen 5, merged in session 27: test_int8_s26.py's planner test)
    ("znver4", 16, 1024, 1024, 1024, BF16),  # many cores
    ("sapphirerapids", 2, 1024, 1024, 1024, BF16),  # AMX tiles
    ("znver4", 2, 4096, 64, 4096, BF16),  # one column panel: fewer than the workers
])
def test_own_a_is_not_the_default_elsewhere(cpu, threads, m, n, k, dtype):
    assert _cfg(m, n, k, cpu, dtype, threads)["own_a"] is False


def test_own_a_refusals():
    with pytest.raises(ValueError, match=r"own_a=1 needs one row of workers \(grid_m=1\), got grid_m=2"):
        _cfg(512, 512, 512, "znver4", plan={"own_a": 1, "grid_m": 2})
    with pytest.raises(ValueError, match=r"own_a=1 .*needs pack=1, split='dp', shares=1 and direct_a=0 \(got pack=0"):
        _cfg(512, 512, 512, "znver4", plan={"own_a": 1, "pack": 0})
    with pytest.raises(ValueError, match=r"own_a=1 .*\(got pack=1, split='dp', shares=4"):
        _cfg(512, 512, 512, "znver4", plan={"own_a": 1, "shares": 4})
    with pytest.raises(ValueError, match=r"plan own_a must be True or False \(or 0 / 1\), got 2"):
        _cfg(512, 512, 512, "znver4", plan={"own_a": 2})
    # asked for on other types and CPUs, it is taken
    assert _cfg(512, 512, 512, "znver4", np.float32, plan={"own_a": 1})["own_a"] is True
    assert _cfg(512, 512, 512, "sapphirerapids", threads=16, plan={"own_a": 1})["own_a"] is True


# Each shape on two of the worker counts (every count on several shapes), with and without
# inline_b: 20 cases rather than all 30 of the product (each compiles ~8 kernels; AMX kernels
# take ~1.4 s each on an Emerald Rapids core).
@pytest.mark.parametrize("m,n,k,threads", [(256, 256, 256, 1), (256, 256, 256, 2), (259, 131, 77, 2), (259, 131, 77, 3),
                                           (100, 300, 257, 3), (100, 300, 257, 1), (37, 513, 1001, 1),
                                           (37, 513, 1001, 3), (520, 200, 513, 2), (520, 200, 513, 3)])
@pytest.mark.parametrize("inline_b", [0, 1])
def test_own_a_matches_numpy(rng, m, n, k, threads, inline_b):
    a = rng.uniform(-1, 1, (m, k)).astype(BF16)
    b = rng.uniform(-1, 1, (k, n)).astype(BF16)
    # (pack named: own_a and inline_b are the packed nest's; a CPU without AVX-512 may plan none)
    plan = {"own_a": 1, "pack": 1, "inline_b": inline_b, "threads": threads, "kt": 128 if k > 300 else 0}
    if not plan["kt"]:
        del plan["kt"]
    cfg = coopjit.compile_gemm(m, n, k, BF16, plan=plan).config
    assert cfg["own_a"] is True and cfg["inline_b"] is bool(inline_b), cfg
    for out in (BF16, np.float32):  # (bf16 C with several K tiles: the partial sums in the scratch)
        check_product(coopjit.matmul(a, b, plan=plan, out_dtype=out), a, b)
    # strided and transposed operands: A's rows every other column, B read along its columns
    a2 = rng.uniform(-1, 1, (m, 2 * k)).astype(BF16)[:, ::2]
    bt = np.ascontiguousarray(rng.uniform(-1, 1, (n, k)).astype(BF16)).T
    at = np.ascontiguousarray(rng.uniform(-1, 1, (k, m)).astype(BF16)).T
    for x, y in ((a2, b), (a, bt), (at, b), (at, bt)):
        check_product(coopjit.matmul(x, y, plan=plan), x, y)
    # alpha / beta into a view of a bigger C; nothing else written
    big = rng.uniform(-1, 1, (m + 2, 2 * n)).astype(BF16)
    keep = big.copy()
    c0 = big[1:-1, ::2].copy()
    coopjit.gemm(a, b, big[1:-1, ::2], alpha=-1.5, beta=0.75, plan=plan)
    check_product(big[1:-1, ::2], a, b, alpha=-1.5, beta=0.75, c0=c0)
    big[1:-1, ::2] = keep[1:-1, ::2]
    np.testing.assert_array_equal(big.view(np.uint16), keep.view(np.uint16))


@pytest.mark.parametrize("threads", [1, 2])
def test_own_a_by_default_and_with_a_prepacked_b(rng, threads):
    old = coopjit.get_num_threads()
    try:
        coopjit.set_num_threads(threads)
        for n in (256, 512):
            a = rng.uniform(-1, 1, (n, n + 3)).astype(BF16)
            b = rng.uniform(-1, 1, (n + 3, n)).astype(BF16)
            cfg = coopjit.compile_gemm(n, n, n + 3, BF16).config
            # the planner's rule: 2-4 workers of vector tiles; a CPU with AMX takes tiles without it
            assert cfg["own_a"] is (threads == 2 and not cfg["amx"]), cfg
            check_product(coopjit.matmul(a, b), a, b)
            pb = coopjit.prepack(b)
            check_product(coopjit.matmul(a, pb, plan={"own_a": 1}), a, b)
            check_product(coopjit.matmul(a, pb), a, b)
    finally:
        coopjit.set_num_threads(old)


def test_own_a_with_more_workers_than_column_panels(rng):
    # 2 column panels of 64 among 3 workers: the third has none and packs nothing
    a = rng.uniform(-1, 1, (300, 301)).astype(BF16)
    b = rng.uniform(-1, 1, (301, 100)).astype(BF16)
    plan = {"own_a": 1, "pack": 1, "threads": 3, "inline_b": 0, "nr": 64, "amx": 0}  # (vector tiles: AMX's are 32 wide)
    check_product(coopjit.matmul(a, b, plan=plan), a, b)
    f = rng.uniform(-1, 1, (300, 301)).astype(np.float32)
    g = rng.uniform(-1, 1, (301, 100)).astype(np.float32)
    check_product(coopjit.matmul(f, g, plan=plan), f, g)  # (f32 panels: own_a asked for)


_SPREAD = textwrap.dedent("""
    import os, sys, numpy as np, ml_dtypes, coopjit
    from coopjit import _core
    c0, c1 = (int(v) for v in sys.argv[1:3])
    spread = sys.argv[3] == "1"
    _core._set_pool_spread(spread)
    coopjit.set_num_threads(2)
    os.sched_setaffinity(0, {c0})  # the calling thread only
    before = set(os.listdir("/proc/self/task"))
    a = np.ones((256, 256), ml_dtypes.bfloat16)
    plan = {"own_a": 0, "pack": 1, "threads": 2}  # a packing barrier: index 1 always runs on the pool thread
    ref = a.astype(np.float64) @ a.astype(np.float64)
    assert np.array_equal(coopjit.matmul(a, a, plan=plan).astype(np.float64), ref)
    pool = [int(t) for t in set(os.listdir("/proc/self/task")) - before]
    assert pool, "no pool thread started"
    for t in pool:
        os.sched_setaffinity(t, {c0})  # onto the caller's CPU
    coopjit.matmul(a, a, plan=plan)
    for t in pool:
        os.sched_setaffinity(t, {c0, c1})  # free to move again
    _core._set_launch_trace(True)
    apart = moved = 0
    for _ in range(20):
        assert np.array_equal(coopjit.matmul(a, a, plan=plan).astype(np.float64), ref)
        (tr,) = _core._launch_traces()
        assert tr["cpu"][0] == c0 and tr["thread"] == [0, 1], tr
        apart += tr["cpu"][1] != c0
        moved += tr["moved"][1]
    print(apart, moved)
""")


def test_a_pool_thread_on_its_callers_cpu_moves_to_another():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU in the affinity mask")
    run = subprocess.run([sys.executable, "-c", _SPREAD, str(cpus[0]), str(cpus[1]), "1"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    apart, moved = (int(v) for v in run.stdout.split())
    # each launch starts with the pool thread away from the caller's CPU (moved at the first one,
    # unless the kernel had moved it before)
    assert apart >= 19 and moved <= 20, run.stdout
    # with the spread off the same products are right (where the thread runs is the kernel's choice)
    off = subprocess.run([sys.executable, "-c", _SPREAD, str(cpus[0]), str(cpus[1]), "0"], capture_output=True,
                         text=True, timeout=300)
    assert off.returncode == 0, off.stderr
    assert int(off.stdout.split()[1]) == 0  # nothing moved


def test_own_a_with_emulated_tiles_and_int8(rng):
    # asked for: AMX panels (the tiles emulated), and int8 quads with s8 x s8's column sums, exact
    a = rng.uniform(-1, 1, (200, 300)).astype(BF16)
    b = rng.uniform(-1, 1, (300, 150)).astype(BF16)
    # (the tiles' emulation needs AVX-512 vectors: an AVX2 CPU runs the int8 quads' plans only)
    emulated = [{"amx": "emulated", "own_a": 1, "threads": 2}] if coopjit.cpu_info()["vector_bytes"] >= 64 else []
    for plan in emulated + [dict(p, kt=64) for p in emulated]:
        assert coopjit.compile_gemm(200, 150, 300, BF16, plan=plan).config["own_a"] is True
        check_product(coopjit.matmul(a, b, plan=plan), a, b)
    for ta, tb in ((np.int8, np.int8), (np.uint8, np.int8)):
        x = rng.integers(np.iinfo(ta).min, np.iinfo(ta).max + 1, (203, 301)).astype(ta)
        y = rng.integers(-128, 128, (301, 150)).astype(tb)
        for plan in [{"own_a": 1, "pack": 1, "threads": 2, "kt": 64}, {"own_a": 1, "pack": 1, "threads": 2, "inline_b": 1}] + emulated:
            np.testing.assert_array_equal(coopjit.matmul(x, y, plan=plan), x.astype(np.int64) @ y.astype(np.int64))
