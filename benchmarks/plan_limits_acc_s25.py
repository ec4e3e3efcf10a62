"""One thread's CPU time (time.thread_time) a call of 256^3 products under register-tile overrides
around the vector register count (accumulators = mr x nr / simd_width), against the planner's own
plan: medians of 9 rounds of 20 calls, the plans alternating within each round (session 25: the
plan check's accumulator limit; recorded in benchmarks/recorded/plan-limits-acc-zen5-session25.txt).
Run under COOPJIT_CPU_LEVEL=avx2 for 16-register AVX2 code on the same machine.

    python3 benchmarks/plan_limits_acc_s25.py float32 "[{'mr': 8, 'nr': 64}, {'mr': 11, 'nr': 48}]"
"""
import ast
import statistics
import sys
import time

import numpy as np

import coopjit

if len(sys.argv) != 3:
    sys.exit(__doc__)
dtype = np.dtype(sys.argv[1])
coopjit.set_num_threads(1)
m = 256
rng = np.random.default_rng(0)
a = rng.standard_normal((m, m)).astype(dtype)
b = rng.standard_normal((m, m)).astype(dtype)
plans = [None] + ast.literal_eval(sys.argv[2])
ks, cfgs = [], []
for p in plans:
    try:
        k = coopjit.compile_gemm(m, m, m, dtype, plan={**(p or {}), "threads": 1})
    except ValueError as e:
        print(p, "refused:", e)
        continue
    ks.append((p, k))
c = np.empty((m, m), dtype)
ref = a.astype(np.float64) @ b
res = {i: [] for i in range(len(ks))}
for rnd in range(9):
    for i, (p, k) in enumerate(ks):
        k(a, b, c)
        t0 = time.thread_time()
        for _ in range(20):
            k(a, b, c)
        res[i].append((time.thread_time() - t0) / 20)
assert all(np.abs(k(a, b) - ref).max() < 1e-2 for _, k in ks)
base = statistics.median(res[0])
for i, (p, k) in enumerate(ks):
    med = statistics.median(res[i])
    cfg = k.config
    acc = cfg["mr"] * cfg["nr"] // cfg["simd_width"]
    print(f"{str(p):28s} mr {cfg['mr']:2d} nr {cfg['nr']:3d} simd {cfg['simd_width']:2d} kb {cfg['kb']:3d} "
          f"acc {acc:3d}  "
          f"{med * 1e3:.3f} ms  {2 * m ** 3 / med / 1e9:6.1f} GFLOP/s  {base / med:.2f}x default  "
          f"(spread {min(res[i]) * 1e3:.3f}-{max(res[i]) * 1e3:.3f})")
