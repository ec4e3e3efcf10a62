"""A vector times a row-major matrix (one row of C, the k_outer walk) with K split in more parts than
threads (issue 14, session 23): plan ksplit above the plan's threads runs its parts as shares
(ThreadPool::run_shares) on those threads, each thread its own run of parts in K order and then a
slower thread's, instead of giving each part a pool thread of its own. The planner keeps one part a
thread on 2-7 cores (two a thread measured no better on the 2-core Zen 5). Plans are read through
coopjit.cross_compile; every product is checked against NumPy in float64, with odd sizes, alpha /
beta, a strided C and bf16 C."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import planned

BF16 = ml_dtypes.bfloat16


@pytest.mark.parametrize("k,n,threads,cpu,want", [
    (4096, 4096, 2, "znver5", 2),
    (2048, 2048, 2, "znver4", 2),
    (4096, 4096, 3, "znver5", 3),
    (4096, 4096, 1, "znver5", 0),            # one thread: no split
    (600, 4096, 3, "znver5", 0),             # K under 256 a thread
    (4096, 4096, 16, "sapphirerapids", 0),   # 8+ cores: the workers share N
])
def test_vector_matrix_keeps_one_part_a_thread(k, n, threads, cpu, want):
    for dtype in (np.float32, np.float64):
        cfg = planned(1, n, k, dtype, threads=threads, cpu=cpu)
        assert cfg["order"] == "k_outer" and cfg["ksplit"] == want, cfg
    # the override: any count
    cfg = planned(1, n, k, np.float32, threads=threads, cpu=cpu, plan={"ksplit": 8, "order": "k_outer"})
    assert cfg["ksplit"] == 8, cfg


def _check(c, a, b, alpha=1.0, beta=0.0, c0=None, rtol=1e-5):
    ref = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if beta:
        ref = ref + beta * c0.astype(np.float64)
    scale = max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(np.asarray(c, np.float64) - ref).max()) / scale
    assert err <= rtol, err


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("ksplit", [3, 4, 8, 64])
@pytest.mark.parametrize("k,n", [(4096, 300), (2049, 531), (515, 1000), (7, 65)])
def test_more_parts_than_threads_sum_every_part(rng, threads, ksplit, k, n):
    a = rng.uniform(-1, 1, (1, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    plan = {"order": "k_outer", "ksplit": ksplit, "kt": 8, "threads": threads}
    cfg = coopjit.compile_gemm(1, n, k, np.float32, plan=plan).config
    assert (int(cfg["ksplit"]), int(cfg["threads"])) == (ksplit, threads), cfg
    _check(coopjit.matmul(a, b, plan=plan), a, b)


@pytest.mark.parametrize("beta", [0.0, -0.5, 1.0])
def test_parts_as_shares_alpha_beta_strided_c(rng, beta):
    a = rng.uniform(-1, 1, (1, 3001)).astype(np.float32)
    b = rng.uniform(-1, 1, (3001, 700)).astype(np.float32)
    big = rng.uniform(-1, 1, (3, 1400)).astype(np.float32)
    c0 = big.copy()
    if beta == 0.0:
        big[1, ::2] = np.nan  # beta 0: C is not read
    a0, b0 = a.copy(), b.copy()
    coopjit.gemm(a, b, big[1:2, ::2], alpha=1.5, beta=beta, plan={"ksplit": 6, "order": "k_outer", "threads": 2})
    _check(big[1:2, ::2], a, b, alpha=1.5, beta=beta, c0=c0[1:2, ::2])
    np.testing.assert_array_equal(big[1, 1::2], c0[1, 1::2])  # the other columns and rows untouched
    np.testing.assert_array_equal(big[[0, 2]], c0[[0, 2]])
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("ksplit", [3, 5, 16])
def test_bf16_c_parts_as_shares(rng, ksplit):
    a = rng.uniform(-1, 1, (1, 2053)).astype(BF16)
    b = rng.uniform(-1, 1, (2053, 777)).astype(BF16)
    plan = {"order": "k_outer", "pack": False, "ksplit": ksplit, "kt": 16, "threads": 2}
    c = coopjit.matmul(a, b, plan=plan)
    assert c.dtype == BF16
    _check(c.astype(np.float32), a.astype(np.float32), b.astype(np.float32), rtol=1e-2)


def test_the_default_plan_on_this_machine_matches_numpy(rng):
    # whatever this machine's planner picks for 2 threads (the K split on 2-7 cores)
    old = coopjit.get_num_threads()
    try:
        coopjit.set_num_threads(2)
        a = rng.standard_normal((1, 2048), dtype=np.float32)
        b = rng.standard_normal((2048, 2048), dtype=np.float32)
        _check(coopjit.matmul(a, b), a, b)
    finally:
        coopjit.set_num_threads(old)


def test_parts_beyond_the_threads_start_no_threads():
    # A fresh process: 64 parts on 2 threads run on the pool's 2 threads (the caller and one more);
    # before, each part had a pool thread of its own.
    code = (
        "import os, numpy as np, coopjit\n"
        "coopjit.set_num_threads(2)\n"
        "a = np.ones((1, 4096), np.float32); b = np.ones((4096, 512), np.float32)\n"
        "c = coopjit.matmul(a, b, plan={'order': 'k_outer', 'ksplit': 64, 'kt': 8, 'threads': 2})\n"
        "assert (c == 4096).all(), c\n"
        "print(len(os.listdir('/proc/self/task')))\n")
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("needs /proc/self/task (Linux) to count the process's threads")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"))
    assert int(out.stdout.split()[-1]) <= 3, out.stdout  # the caller, one pool thread (and at most one other)
