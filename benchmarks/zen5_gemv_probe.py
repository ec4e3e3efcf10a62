"""f32 1 x K x N (a row vector times a row-major K x N matrix) on the 2-core Zen 5: coopjit's plan variants
through plan= against numpy.dot (OpenBLAS on as many threads) in one process. Each round times every case as
a block of calls (2 threads: wall time after a pause; 1 thread: the calling thread's CPU time), in an order
rotated each round; medians and minima over rounds, /proc/loadavg before and after. Issue 14, session 23
(helper h14gemv).  THREADS=1 for one thread (set OPENBLAS_NUM_THREADS=1 too).
    python benchmarks/zen5_gemv_probe.py [ROUNDS] [KxN] ['{plan};{plan};...']"""
import json
import os
import statistics
import sys
import time

import numpy as np

import coopjit

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
k, n = (int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "4096x4096").split("x"))
variants = [json.loads(v) for v in sys.argv[3].split(";")] if len(sys.argv) > 3 else [
    None, {"ksplit": 0}, {"kt": 4}, {"kt": 16}, {"b_prefetch": 0}, {"b_prefetch": 512}, {"b_prefetch": 2048}]
thr = int(os.environ.get("THREADS", "2"))
clock = time.thread_time if thr == 1 else time.perf_counter
coopjit.set_num_threads(thr)
rng = np.random.default_rng(1)
a = rng.standard_normal((1, k), dtype=np.float32)
b = rng.standard_normal((k, n), dtype=np.float32)
ref = a.astype(np.float64) @ b.astype(np.float64)
cases = {}
for v in variants:
    c = coopjit.matmul(a, b, plan=v)
    err = float(np.abs(c - ref).max() / np.abs(ref).max())
    assert err < 1e-5, (v, err)
    cfg = dict(coopjit.compile_gemm(1, n, k, np.float32, plan=v).config) if v else dict(coopjit.compile_gemm(1, n, k, np.float32).config)
    name = json.dumps(v) if v else "default"
    print(f"  {name}: [{cfg['order']} mr{cfg['mr']} nr{cfg['nr']} kt{cfg['kt']} ksplit{cfg['ksplit']} b_prefetch{cfg['b_prefetch']} t{cfg['threads']}] err {err:.1e}")
    cases[name] = lambda v=v: coopjit.matmul(a, b, plan=v)
cn = np.empty((1, n), np.float32)
cases["numpy.dot"] = lambda: np.dot(a, b, out=cn)
calls = 8
times = {name: [] for name in cases}
l0 = open("/proc/loadavg").read().split()[0]
names = list(cases)
for r in range(rounds):
    for name in names[r % len(names):] + names[: r % len(names)]:
        f = cases[name]
        f()
        if thr > 1:
            time.sleep(0.1)
        t = clock()
        for _ in range(calls):
            f()
        times[name].append((clock() - t) / calls)
l1 = open("/proc/loadavg").read().split()[0]
mb = 4.0 * k * n / 1e6
base = statistics.median(times["numpy.dot"])
print(f"f32 1x{k}x{n} (M x K x N here), {thr} thread(s), {'CPU time' if thr == 1 else 'wall'}, {rounds} rounds x {calls} calls, load {l0} -> {l1}")
for name, t in times.items():
    med = statistics.median(t)
    print(f"{name:>28}: median {med * 1e6:7.0f} us ({mb / med * 1e-3:5.1f} GB/s)  min {min(t) * 1e6:7.0f} us  "
          f"numpy/this {base / med:.2f}")
