"""Prepacked products of N <= 256 (the panels force nr), one thread's CPU time (time.thread_time),
medians of 9 rounds, with the plan the planner takes (session 25:
benchmarks/recorded/prepacked-tile-zen5-session25.txt).

    PYTHONPATH=<build> python3 benchmarks/prepacked_tile_s25.py
"""
import statistics
import time

import numpy as np

import coopjit

coopjit.set_num_threads(1)
rng = np.random.default_rng(0)
out = []
for dt in (np.float32, np.float64):
    for (m, k, n) in ((64, 257, 130), (301, 257, 130), (512, 1024, 200), (256, 512, 96), (1000, 512, 130)):
        w = rng.standard_normal((k, n)).astype(dt)
        pw = coopjit.prepack(w)
        x = rng.standard_normal((m, k)).astype(dt)
        o = np.empty((m, n), dt)
        coopjit.matmul(x, pw, out=o)
        assert np.abs(o - x.astype(np.float64) @ w).max() < (1e-3 if dt == np.float32 else 1e-9) * k
        reps = max(3, int(2e8 / (2 * m * n * k)))
        ts = []
        for rnd in range(9):
            t0 = time.thread_time()
            for _ in range(reps):
                coopjit.matmul(x, pw, out=o)
            ts.append((time.thread_time() - t0) / reps)
        cfg = coopjit._core.gemm_plan(x, np.broadcast_to(pw._dummy, pw.shape), o, False,
                                      ["f32"] * 3 if dt == np.float32 else ["f64"] * 3,
                                      coopjit._gemm._overrides(pw._plan(None)))
        out.append(f"{np.dtype(dt).name} {m}x{k}x{n}: mr {cfg['mr']} nr {cfg['nr']} {statistics.median(ts)*1e6:.0f} us")
print("\n".join(out))
