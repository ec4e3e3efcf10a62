import numpy as np, coopjit, ml_dtypes
def ops(dt, K=8192):
    X = 2.0**20 if dt != np.float64 else 2.0**500
    a = np.ones((4, K), dt); b = np.empty((K, 5), dt)
    b[:K//2] = X; b[K//2:] = -X; b[-1] = -X + (4096 if dt != np.float64 else 2.0**460)
    return a, b
for dt in (np.float32, ml_dtypes.bfloat16, np.float64):
    a, b = ops(dt); alpha = 1e33 if dt != np.float64 else 1e155
    want = alpha * (a.astype(float) @ b.astype(float))
    for plan in (None, {'order':'k_outer','ksplit':2,'threads':2}, {'order':'m_inner','ksplit':3,'threads':2}, {'pack':1}):
        for kw in ({}, {'bias': np.zeros(5, np.float32)}, {'bias': np.zeros(5, np.float32), 'activation':'relu'}):
            try:
                r = coopjit.gemm(a, b, alpha=alpha, plan=plan, **kw)
                print(np.dtype(dt).name, plan, list(kw), r[0,0], want[0,0])
            except Exception as e: print(np.dtype(dt).name, plan, list(kw), 'ERR', e)
