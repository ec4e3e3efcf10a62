"""Float32 accumulation over long K and long reductions against NumPy in float64 (session 26).

The audit (benchmarks/recorded/audit-zen5-f32-long-k-accuracy-session26.txt) found each output's
f32 accumulator running over all of K in the unpacked tile walk (and the dot walk's lanes over
K / nr), and a reduction's lanes over their whole walk, so the error grew like n * eps where a
BLAS's (kc blocks added into C) and NumPy's pairwise sums grow far slower. Uniform [0, 1) data:
every term positive, so rounding errors do not cancel. Each bound is a multiple of float32's eps
(or of NumPy's own error where that is larger); the cases marked in CASES failed before."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

EPS = float(np.finfo(np.float32).eps)
BF16 = ml_dtypes.bfloat16


def _rel(got, exact):
    return float(np.max(np.abs(np.asarray(got, np.float64) - exact) / np.abs(exact)))


# (dtype, M, N, K, bound in eps). Before: the unpacked walk's 200x200x8192 4.9e-6 (41 eps),
# 8x8x2^20 ~ 1e-3, 1x1x2^22 ~ 3e-3, 1x64x2^20 ~ 5e-4, bf16 / f16 into f32 ~ 1e-3 / 4e-5.
CASES = [(np.float32, 200, 200, 2**13, 12), (np.float32, 8, 8, 2**20, 48), (np.float32, 1, 1, 2**22, 24),
         (np.float32, 1, 64, 2**20, 48), (np.float32, 64, 1, 2**20, 12), (np.float32, 5, 3, 3001, 12),
         # bf16 64x64x2^18: 64 eps, for an AMX CPU's tile path (each K tile's sums in tile registers,
         # then added into C): 5.2e-6 (44 eps) on the 16-core Emerald Rapids host, NumPy 1.1e-6
         (BF16, 1, 1, 2**22, 24), (BF16, 64, 64, 2**18, 64), (BF16, 256, 1, 2**19, 12),
         (np.float16, 64, 64, 2**18, 24), (np.float16, 1, 1, 2**22, 24)]


@pytest.mark.parametrize("dt,m,n,k,bound", CASES, ids=[f"{np.dtype(c[0]).name}-{c[1]}x{c[2]}x{c[3]}" for c in CASES])
def test_long_k_product_error_stays_small(rng, threads, dt, m, n, k, bound):
    a = rng.random((m, k), dtype=np.float32).astype(dt)
    b = rng.random((k, n), dtype=np.float32).astype(dt)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    got = coopjit.matmul(a, b, out_dtype=np.float32)
    err_np = _rel(a.astype(np.float32) @ b.astype(np.float32), exact)
    assert _rel(got, exact) <= max(bound * EPS, 4 * err_np), (_rel(got, exact), err_np)


@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_long_k_gemm_alpha_beta_error_stays_small(rng, beta):
    # C = alpha A B + beta C through the blocks of K added into C: the first block applies beta.
    a = rng.random((30, 2**16), dtype=np.float32)
    b = rng.random((2**16, 20), dtype=np.float32)
    c = rng.random((30, 20), dtype=np.float32)
    exact = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c.astype(np.float64)
    coopjit.gemm(a, b, c, alpha=0.5, beta=beta)
    assert _rel(c, exact) <= 16 * EPS


def test_ones_dot_ones_is_exact(threads):
    # Blocks of 1024 products (exact integers), added into an exact integer sum up to 2^25: exact.
    # (Before, on one thread: the one f32 accumulator stopped at 2^24, where adding 1 rounds
    # back; two threads split K in halves of 2^24 and were exact.)
    ones = np.ones(2**25, np.float32)
    assert coopjit.matmul(ones[None, :], ones[:, None])[0, 0] == 2**25
    assert coopjit.matmul(ones, ones) == 2**25
    assert coopjit.reduce(ones) == 2**25


def _broadcast(rng, n, cols):
    return np.broadcast_to(rng.random(cols, dtype=np.float32), (n, cols))


# (name, array maker, axis, bound in eps). Before: (2^22, 4) axis 0 5.0e-5, the stride-0 rows
# (10^6, 3) axis 0 1.2e-2 and (10^6, 64) 1.5e-2 (NumPy: the same). (One long row, or one column
# of stride-0 rows, goes to the row form in pieces: test_reduce_row_accuracy_s27.py, session 27.)
RED = [("4e6x4-axis0", lambda r: r.random((2**22, 4), dtype=np.float32), 0, 8),
       ("4x4e6-axis1", lambda r: r.random((4, 2**22), dtype=np.float32), 1, 8),
       # (wide rows: the column_rows form, its partials in memory, unchanged: 3.8e-6, NumPy's 4e-6)
       ("8192x1024-axis0", lambda r: r.random((8192, 1024), dtype=np.float32), 0, 64),
       ("stride0-1e6x3-axis0", lambda r: _broadcast(r, 10**6, 3), 0, 48),
       ("stride0-1e6x64-axis0", lambda r: _broadcast(r, 10**6, 64), 0, 128)]


@pytest.mark.parametrize("make,axis,bound", [c[1:] for c in RED], ids=[c[0] for c in RED])
def test_long_sum_error_stays_small(rng, threads, make, axis, bound):
    x = make(rng)
    exact = x.astype(np.float64).sum(axis=axis)
    assert _rel(coopjit.reduce(x, axis=axis), exact) <= bound * EPS
