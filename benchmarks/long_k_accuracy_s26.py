"""Session 26's audit: the relative error of float32 products against float64 as K grows, coopjit
beside NumPy (OpenBLAS), on uniform [0, 1) data (every term positive, so a rounding error does not
cancel). coopjit's register tile keeps each output's f32 accumulator over all of K (the K tiles
continue it), so its error grows like K * eps / 2; a BLAS adds each kc block's partial sum into C.
Not a timing: one thread (set_num_threads(1)), results only.

    python3 benchmarks/long_k_accuracy_s26.py
"""
import numpy as np

import coopjit

coopjit.set_num_threads(1)
rng = np.random.default_rng(0)
print(f"{'M x N x K':>22} {'coopjit':>9} {'NumPy':>9}  (max relative error against float64)")
for m, n, k in [(200, 200, 2**13), (200, 200, 2**17), (16, 64, 2**21), (32, 32, 2**22), (1, 64, 2**22),
                (64, 1, 2**22), (1, 1, 2**23)]:
    a = rng.random((m, k), dtype=np.float32)
    b = rng.random((k, n), dtype=np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    got = coopjit.matmul(a, b)
    ref = a @ b
    err, err_np = np.max(np.abs(got - exact) / exact), np.max(np.abs(ref - exact) / exact)
    print(f"{f'{m} x {n} x {k}':>22} {err:9.1e} {err_np:9.1e}")
ones = np.ones(2**25, np.float32)
print(f"ones(2**25) @ ones(2**25) (1 x K @ K x 1): coopjit {coopjit.matmul(ones[None, :], ones[:, None])[0, 0]:.0f}, "
      f"NumPy {(ones[None, :] @ ones[:, None])[0, 0]:.0f}, exact {2**25}")
