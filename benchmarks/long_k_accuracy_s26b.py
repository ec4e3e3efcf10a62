"""Session 26 (hacc): float32 product and reduction error against float64 as K (or the reduced
length) grows, coopjit beside NumPy (OpenBLAS / NumPy's pairwise sum), on uniform [0, 1) data
(every term positive, so rounding errors do not cancel). The audit's cases
(long_k_accuracy_s26.py) plus matrix-vector products (order 'dot'), bf16 / f16 products
(accumulated in f32) and sums along each axis and along a stride-0 broadcast. Not a timing:
one thread (set_num_threads(1)), results only.

    python3 benchmarks/long_k_accuracy_s26b.py
"""
import ml_dtypes
import numpy as np

import coopjit

coopjit.set_num_threads(1)
rng = np.random.default_rng(0)
BF16 = ml_dtypes.bfloat16


def rel(got, exact):
    return float(np.max(np.abs(np.asarray(got, np.float64) - exact) / np.abs(exact)))


print(f"{'case':>34} {'coopjit':>9} {'NumPy':>9}  (max relative error against float64)")
for dt, m, n, k in [(np.float32, 200, 200, 2**13), (np.float32, 200, 200, 2**17), (np.float32, 16, 64, 2**21),
                    (np.float32, 32, 32, 2**22), (np.float32, 1, 64, 2**22), (np.float32, 64, 1, 2**22),
                    (np.float32, 1, 1, 2**23), (np.float32, 4096, 1, 2**16), (np.float32, 1, 4096, 2**14),
                    (BF16, 64, 64, 2**20), (BF16, 1, 1, 2**22), (BF16, 256, 1, 2**20), (np.float16, 64, 64, 2**18)]:
    a = rng.random((m, k), dtype=np.float32).astype(dt)
    b = rng.random((k, n), dtype=np.float32).astype(dt)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    got = coopjit.matmul(a, b, out_dtype=np.float32)  # (f16 C would overflow)
    ref = a.astype(np.float32) @ b.astype(np.float32)  # NumPy has no bf16 matmul: its f32 product
    name = f"{np.dtype(dt).name} {m} x {n} x {k}"
    print(f"{name:>34} {rel(got, exact):9.1e} {rel(ref, exact):9.1e}")
for shape, axis in [((8192, 8192), 0), ((8192, 8192), 1), ((2**22, 4), 0), ((4, 2**22), 1), ((2**24,), 0)]:
    x = rng.random(shape, dtype=np.float32)
    exact = x.astype(np.float64).sum(axis=axis)
    print(f"{f'sum f32 {shape} axis {axis}':>34} {rel(coopjit.reduce(x, axis=axis), exact):9.1e} "
          f"{rel(x.sum(axis=axis), exact):9.1e}")
x = np.broadcast_to(np.float32(0.1), (10**6,))
exact = np.float64(np.float32(0.1)) * 10**6
print(f"{'sum f32 stride-0 broadcast 1e6':>34} {rel(coopjit.reduce(x), exact):9.1e} {rel(x.sum(), exact):9.1e}")
for cols in (1, 3, 64):
    x = np.broadcast_to(rng.random(cols, dtype=np.float32), (10**6, cols))
    exact = x[:1].astype(np.float64).sum(axis=0) * 10**6
    print(f"{f'sum f32 (1e6, {cols}) rows stride 0 axis 0':>34} {rel(coopjit.reduce(x, axis=0), exact):9.1e} "
          f"{rel(x.sum(axis=0), exact):9.1e}")
ones = np.ones(2**25, np.float32)
print(f"ones(2**25) @ ones(2**25) (1 x K @ K x 1): coopjit {coopjit.matmul(ones[None, :], ones[:, None])[0, 0]:.0f}, "
      f"NumPy {(ones[None, :] @ ones[:, None])[0, 0]:.0f}, exact {2**25}")
print(f"sum(ones(2**25)): coopjit {coopjit.reduce(ones):.0f}, NumPy {ones.sum():.0f}, exact {2**25}")
