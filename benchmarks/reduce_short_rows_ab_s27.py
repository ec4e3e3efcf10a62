"""Axis 0 of short contiguous rows (session 27): GB/s of coopjit.reduce, medians of 7 blocks of 5 calls;
argument: threads (1: CPU time, else wall time). Run it with two builds in alternating processes."""
import os, sys, time, numpy as np, coopjit
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rounds import timed  # noqa: E402
t = int(sys.argv[1]); coopjit.set_num_threads(t)
clock = time.thread_time if t == 1 else time.perf_counter
rng = np.random.default_rng(0)
out = []
for shape, op in (((4000000, 3), "sum"), ((4000000, 3), "max"), ((1000003, 5), "sum"), ((2**20, 15), "sum")):
    a = rng.random(shape, dtype=np.float32)
    t_call = timed(lambda: coopjit.reduce(a, axis=0, op=op), blocks=7, calls=5, clock=clock)
    out.append(f"{op} {shape}: {a.nbytes / t_call / 1e9:.1f}")
print(" | ".join(out))
