"""Large finite beta on K-split float products: beta * c plus a scaled part overflowing where
alpha * (a @ b) + beta * c (NumPy in float64, cast to C's dtype) does not."""
import numpy as np
import ml_dtypes
import coopjit

def case(dt, X, cval, beta, alpha=1.0, K=8192):
    a = np.ones((4, K), dt)
    b = np.zeros((K, 5), dt)
    b[:K // 2] = X
    b[K // 2:] = -X
    c = np.full((4, 5), cval, dt)
    ref = (alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c.astype(np.float64)).astype(dt)
    return a, b, c, ref

PLANS = [None, {"order": "k_outer", "ksplit": 2, "threads": 2}, {"order": "m_inner", "ksplit": 3, "threads": 2},
         {"pack": 1}, {"split": "sk", "threads": 2}]
bad = 0
for dt, X, cval, beta in [(np.float32, 2.0**115, 1.5 * 2.0**100, 2.0**27), (np.float64, 2.0**1010, 1.5 * 2.0**900, 2.0**123),
                          (np.float32, 2.0**115, -1.5 * 2.0**100, -2.0**27)]:
    for plan in PLANS:
        a, b, c, ref = case(dt, X, cval, beta)
        got = coopjit.gemm(a, b, c.copy(), beta=beta, plan=plan)
        ok = np.array_equal(got, ref)
        bad += not ok
        print(np.dtype(dt).name, beta, plan, "ok" if ok else f"WRONG got {got[0, 0]} want {ref[0, 0]}")
        k = coopjit.compile_gemm(4, 5, 8192, dt, accumulate=True, plan=plan)
        got = k(a, b, c.copy(), beta=beta)
        ok = np.array_equal(got, ref)
        bad += not ok
        print("  kernel", "ok" if ok else f"WRONG got {got[0, 0]} want {ref[0, 0]}")
print("wrong:", bad)
