"""The large-alpha / large-beta check's cost: one thread's CPU time (time.thread_time, _rounds.timed
7 blocks of 0.3 s, the median), gemm and a compiled kernel with C given, alpha 1 / 2 (beta 0.5) and
beta 2 (alpha 1). Run as PYTHONPATH=<site> python3 p_cost.py, builds alternating."""
import os
import sys
import time

import numpy as np

import coopjit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "benchmarks"))
from _rounds import timed  # noqa: E402

coopjit.set_num_threads(1)
rng = np.random.default_rng(0)
for (m, n, k) in ((16, 16, 16), (64, 64, 64), (256, 256, 256), (512, 512, 2048)):
    a = rng.random((m, k), dtype=np.float32)
    b = rng.random((k, n), dtype=np.float32)
    c = np.zeros((m, n), np.float32)
    kern = coopjit.compile_gemm(m, n, k, np.float32, accumulate=True)
    row = []
    for alpha, beta in ((1.0, 0.5), (2.0, 0.5), (1.0, 2.0)):
        t1 = timed(lambda: coopjit.gemm(a, b, c, alpha=alpha, beta=beta), blocks=7, seconds=0.3, clock=time.thread_time)
        t2 = timed(lambda: kern(a, b, c, alpha=alpha, beta=beta), blocks=7, seconds=0.3, clock=time.thread_time)
        row.append(f"a{alpha:g} b{beta:g}: gemm {t1 * 1e6:8.1f} kern {t2 * 1e6:8.1f}")
    print(f"{m}x{n}x{k}", " | ".join(row), flush=True)
