"""f32 M x K times a column vector (A row-major: coopjit's dot walk) on the 2-core Zen 5: coopjit's plan
variants through plan= against numpy (OpenBLAS on as many threads) in one process. Each round times every
case as a block of calls (2 threads: wall time after a pause; 1 thread: the calling thread's CPU time), in
an order rotated each round; medians and minima over rounds, /proc/loadavg before and after. Issue 14,
session 24 (helper h14mv).  THREADS=1 for one thread (set OPENBLAS_NUM_THREADS=1 too); DTYPE=f64 / bf16; QUIET=1:
each block waits (up to 10 s) for 0.2 s in which the machine's cores were at least 90% idle.
    python benchmarks/zen5_mv_probe.py [ROUNDS] [MxK] ['{plan};{plan};...']"""
import json
import os
import statistics
import sys
import time

import ml_dtypes
import numpy as np

import coopjit
from _rounds import quiet_gate

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
m, k = (int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "4096x4096").split("x"))
variants = [json.loads(v) if v != "null" else None for v in sys.argv[3].split(";")] if len(sys.argv) > 3 else [
    None, {"mr": 8}, {"mr": 2}, {"mr": 1, "nr": 128}]
thr = int(os.environ.get("THREADS", "2"))
dt = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16}[os.environ.get("DTYPE", "f32")]
clock = time.thread_time if thr == 1 else time.perf_counter
coopjit.set_num_threads(thr)
rng = np.random.default_rng(1)
a = rng.standard_normal((m, k)).astype(dt)
x = rng.standard_normal((k, 1)).astype(dt)
ref = a.astype(np.float64) @ x.astype(np.float64)
cases = {}
for v in variants:
    c = coopjit.matmul(a, x, plan=v)
    err = float(np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max())
    assert err < 1e-2, (v, err)
    cfg = dict(coopjit.compile_gemm(m, 1, k, dt, plan=v).config) if v else dict(coopjit.compile_gemm(m, 1, k, dt).config)
    name = json.dumps(v) if v else "default"
    print(f"  {name}: [{cfg['order']} mr{cfg['mr']} nr{cfg['nr']} kt{cfg['kt']} t{cfg['threads']} shares{cfg.get('shares')}] err {err:.1e}")
    cases[name] = lambda v=v: coopjit.matmul(a, x, plan=v)
if m == k:  # the vector-matrix product of the same matrix (the k_outer nest, K split): the rate to reach
    xt = rng.standard_normal((1, k)).astype(dt)
    cases["vm 1xKxK default"] = lambda: coopjit.matmul(xt, a)
if dt != ml_dtypes.bfloat16:
    cn = np.empty((m, 1), dt)
    cases["numpy.dot"] = lambda: np.dot(a, x, out=cn)
waits = 0
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
        waits += not quiet_gate()
        t = clock()
        for _ in range(calls):
            f()
        times[name].append((clock() - t) / calls)
l1 = open("/proc/loadavg").read().split()[0]
mb = a.nbytes / 1e6
base = statistics.median(times.get("numpy.dot", times["default"]))
print(f"{np.dtype(dt).name} {m}x1x{k} (A row-major), {thr} thread(s), {'CPU time' if thr == 1 else 'wall'}, {rounds} rounds x {calls} calls, load {l0} -> {l1}" + (f", quiet gate ({waits} blocks without a quiet 0.2 s)" if os.environ.get("QUIET") == "1" else ""))
for name, t in times.items():
    med = statistics.median(t)
    print(f"{name:>28}: median {med * 1e6:7.0f} us ({mb / med * 1e-3:5.1f} GB/s)  min {min(t) * 1e6:7.0f} us  "
          f"ref/this {base / med:.2f}")
