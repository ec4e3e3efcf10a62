import sys, time, numpy as np, coopjit
sys.path.insert(0, '/work/wt/haudit7/benchmarks')
from _rounds import timed
coopjit.set_num_threads(1)
rng = np.random.default_rng(0)
for (m, n, k) in ((16, 16, 16), (64, 64, 64), (256, 256, 256), (512, 512, 2048)):
    a = rng.random((m, k), dtype=np.float32); b = rng.random((k, n), dtype=np.float32); c = np.zeros((m, n), np.float32)
    kern = coopjit.compile_gemm(m, n, k, np.float32, accumulate=True)
    row = []
    for alpha in (1.0, 2.0):
        t1 = timed(lambda: coopjit.gemm(a, b, c, alpha=alpha, beta=0.5), blocks=7, seconds=0.3, clock=time.thread_time)
        t2 = timed(lambda: kern(a, b, c, alpha=alpha, beta=0.5), blocks=7, seconds=0.3, clock=time.thread_time)
        row.append(f"alpha {alpha}: gemm {t1*1e6:9.1f} us kernel {t2*1e6:9.1f} us")
    print(f"{m}x{n}x{k}", " | ".join(row), flush=True)
