"""Session 26 (hacc): the speed check of the long-K accumulation change: one thread, CPU time, the
median of 7 blocks per case, printed as JSON; run main's build and the branch's in alternating
processes (benchmarks/recorded/accuracy-zen5-long-k-session26.txt)."""
import json
import os
import sys
import time

import numpy as np, ml_dtypes
import coopjit
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rounds import timed  # noqa: E402 (the blocks of calls the CPU scripts share)
coopjit.set_num_threads(1)
rng = np.random.default_rng(1)
BF = ml_dtypes.bfloat16
def mm(m, n, k, dt=np.float32):
    a = rng.random((m, k), dtype=np.float32).astype(dt); b = rng.random((k, n), dtype=np.float32).astype(dt)
    out = np.empty((m, n), np.float32 if dt == np.float32 else dt)
    return lambda: coopjit.matmul(a, b, out=out)
def mv(m, k):
    a = rng.random((m, k), dtype=np.float32); x = rng.random(k, dtype=np.float32); out = np.empty(m, np.float32)
    return lambda: coopjit.matmul(a, x, out=out)
def red(axis):
    x = rng.random((8192, 8192), dtype=np.float32)
    return lambda: coopjit.reduce(x, axis=axis)
cases = {"f32 64^3": mm(64, 64, 64), "f32 100x37x250": mm(100, 37, 250), "f32 513x129x700": mm(513, 129, 700),
         "f32 2048^3": mm(2048, 2048, 2048), "f32 1x4096x4096": mm(1, 4096, 4096), "f32 4096x4096 @ x": mv(4096, 4096),
         "f32 64x4096x4096": mm(64, 4096, 4096), "bf16 1024^3": mm(1024, 1024, 1024, BF),
         "f32 200x200x8192": mm(200, 200, 8192), "f32 1x1x2^22": mm(1, 1, 2**22),
         "sum 8192^2 axis 0": red(0), "sum 8192^2 axis 1": red(1), "sum 8192^2 all": red(None)}
res = {}
for name, f in cases.items():
    f()  # (and timed's warm-up call: two before the call that sizes the blocks)
    res[name] = timed(f, blocks=7, seconds=7 * 0.02, clock=time.thread_time)
print(json.dumps(res))
