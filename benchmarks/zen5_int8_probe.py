"""int8 GEMM on the 2-core Zen 5 (issue 14, session 26): plan variants of the square products,
one thread's CPU time (time.thread_time, medians of blocks) under COOPJIT_NUM_THREADS=1, or wall
time with 2 workers; each checked exact against an int64 NumPy product.

    COOPJIT_NUM_THREADS=1 python benchmarks/zen5_int8_probe.py 256,512 '[null, {"mr": 8, "nr": 48}]'
"""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
from _rounds import timed  # noqa: E402

sizes = [int(x) for x in sys.argv[1].split(",")]
plans = json.loads(sys.argv[2])
one = coopjit.get_num_threads() == 1
clock = time.thread_time if one else time.perf_counter
rng = np.random.default_rng(0)
for s in sizes:
    a = rng.integers(-128, 128, (s, s), dtype=np.int8)
    b = rng.integers(-128, 128, (s, s), dtype=np.int8)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    out = np.empty((s, s), np.int32)
    for plan in plans:
        try:
            coopjit.matmul(a, b, out=out, plan=plan)
            ok = np.array_equal(out, ref)
            time.sleep(0.05)
            t = timed(lambda: coopjit.matmul(a, b, out=out, plan=plan), blocks=7, seconds=0.4, clock=clock)
            cf = coopjit.compile_gemm(s, s, s, np.int8, plan=plan).config
            desc = " ".join(f"{f}={cf[f]}" for f in ("mr", "nr", "kb", "kt", "mc_tiles", "inline_b", "grid_m", "shares"))
            print(f"{s} {json.dumps(plan):<36} {t*1e6:9.1f} us {2*s**3/t/1e9:7.1f} GOP/s exact={ok} [{desc}]", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{s} {json.dumps(plan):<36} error {str(e)[:150]}", flush=True)
