"""One thread's CPU time (time.thread_time) a call of 256^3 float32 products under plan= overrides,
against the planner's own plan: medians of 7 rounds of 20 calls, the plans alternating within each
round (session 24: what the plan check's register-tile and K-step limits rest on; recorded in
benchmarks/recorded/plan-limits-zen5-session24.txt).

    python3 benchmarks/plan_limits_speed_s24.py "[{'kb': 4, 'mr': 16, 'nr': 64}, {'kb': 32, 'mr': 8, 'nr': 32}]"
"""
import ast
import statistics
import sys
import time

import numpy as np

import coopjit

if len(sys.argv) != 2:
    sys.exit(__doc__)
coopjit.set_num_threads(1)
m = 256
rng = np.random.default_rng(0)
a = rng.standard_normal((m, m)).astype(np.float32)
b = rng.standard_normal((m, m)).astype(np.float32)
plans = [None] + ast.literal_eval(sys.argv[1])
ks = [coopjit.compile_gemm(m, m, m, np.float32, plan={**(p or {}), "threads": 1}) for p in plans]
c = np.empty((m, m), np.float32)
res = {i: [] for i in range(len(plans))}
for rnd in range(7):
    for i, k in enumerate(ks):
        k(a, b, c)
        t0 = time.thread_time()
        for _ in range(20):
            k(a, b, c)
        res[i].append((time.thread_time() - t0) / 20)
base = statistics.median(res[0])
for i, p in enumerate(plans):
    med = statistics.median(res[i])
    cfg = ks[i].config
    print(p, cfg["mr"], cfg["nr"], cfg["kb"], f"{med * 1e3:.3f} ms  {2 * m ** 3 / med / 1e9:.1f} GFLOP/s  {base / med:.2f}x default")
