"""Shared pieces of the CPU GEMM tests: a plan's configuration through cross_compile (the planner
for another CPU model, no hardware needed), and a product checked against NumPy in float64 with a
bound from the magnitudes |A| |B| (each of the K + 2 roundings of an f32 accumulator, plus one
rounding to C's type)."""
import ml_dtypes
import numpy as np

import coopjit

BF16 = ml_dtypes.bfloat16


def plan_config(m, n, k, cpu, dtype=np.float32, threads=2, **kw):
    """The configuration coopjit's planner picks for an (m x k) @ (k x n) product of `dtype` on
    `cpu` with `threads` workers; keywords go to cross_compile (plan=..., ...)."""
    a, b = np.ones((m, k), dtype), np.ones((k, n), dtype)
    return coopjit.cross_compile(a, b, cpu=cpu, threads=threads, **kw, code=False)["config"]


def check_product(c, a, b, alpha=1.0, beta=0.0, c0=None, acc_eps=None):
    """Asserts that c == alpha * a @ b + beta * c0 within the error bound of an accumulation in
    f32 (acc_eps: another accumulator's unit roundoff) and one rounding to c's dtype."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = alpha * (a64 @ b64)
    mag = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if beta:
        ref = ref + beta * c0.astype(np.float64)
        mag = mag + abs(beta) * np.abs(c0.astype(np.float64))
    if acc_eps is None:
        acc_eps = np.finfo(np.float32).eps
    out_eps = 2.0**-8 if c.dtype == BF16 else np.finfo(c.dtype).eps
    err = np.abs(c.astype(np.float64) - ref)
    bound = (a.shape[-1] + 2) * acc_eps * mag + out_eps * np.abs(ref) + 1e-30
    assert np.all(err <= bound), (err - bound).max()
