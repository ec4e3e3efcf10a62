"""Axis 0 of short contiguous rows (session 27): GB/s of coopjit.reduce, medians of 7 blocks of 5 calls;
argument: threads (1: CPU time, else wall time). Run it with two builds in alternating processes."""
import sys, time, statistics, numpy as np, coopjit
t = int(sys.argv[1]); coopjit.set_num_threads(t)
clock = time.thread_time if t == 1 else time.perf_counter
rng = np.random.default_rng(0)
out = []
for shape, op in (((4000000, 3), "sum"), ((4000000, 3), "max"), ((1000003, 5), "sum"), ((2**20, 15), "sum")):
    a = rng.random(shape, dtype=np.float32)
    coopjit.reduce(a, axis=0, op=op)
    ts = []
    for _ in range(7):
        c = clock(); [coopjit.reduce(a, axis=0, op=op) for _ in range(5)]; ts.append((clock() - c) / 5)
    out.append(f"{op} {shape}: {a.nbytes / statistics.median(ts) / 1e9:.1f}")
print(" | ".join(out))
