"""Plan variants of an M x K row-major A times a column vector (coopjit's dot walk) on 2 workers, measured by
each worker's busy time in the launch trace (start to end of its share: what other processes on a shared
machine disturb least), with the call's wall time; the vector-matrix product of the same matrix for
reference when M = K. Rounds of blocks of 10 calls, the order rotated each round. Issue 14, session 24.
    python benchmarks/zen5_mv_trace_sweep.py MxK '{plan};{plan};...' ROUNDS [f32|f64]"""
import sys, time, json, numpy as np, coopjit, statistics
from coopjit import _core
coopjit.set_num_threads(2)
m, k = (int(v) for v in sys.argv[1].split("x"))
dt = {"f32": np.float32, "f64": np.float64}[sys.argv[4] if len(sys.argv) > 4 else "f32"]
rng = np.random.default_rng(1)
a = rng.standard_normal((m, k)).astype(dt); x = rng.standard_normal((k, 1)).astype(dt)
xt = rng.standard_normal((1, k)).astype(dt)
variants = [json.loads(v) for v in sys.argv[2].split(";")]
cases = {json.dumps(v): (lambda v=v: coopjit.matmul(a, x, plan=v)) for v in variants}
if m == k: cases["vm"] = lambda: coopjit.matmul(xt, a)
busy = {n: [] for n in cases}; walls = {n: [] for n in cases}
names = list(cases)
for r in range(int(sys.argv[3])):
  for name in names[r % len(names):] + names[:r % len(names)]:
    f = cases[name]
    f(); time.sleep(0.1)
    _core._set_launch_trace(True); _core._launch_traces()
    for _ in range(10):
        t0 = time.perf_counter(); f(); walls[name].append(time.perf_counter() - t0)
    tr = _core._launch_traces(); _core._set_launch_trace(False)
    for t in tr:
        for w in range(t["workers"]):
            busy[name].append((t["end_ns"][w] - t["start_ns"][w]) / 1e3)
print(f"{sys.argv[1]} {dt.__name__}, 2 threads, load {open('/proc/loadavg').read().split()[0]}: worker busy us (median / min) and call wall")
for n in names:
    print(f"  {n:40s} busy {statistics.median(busy[n]):7.1f} / {min(busy[n]):7.1f}   wall {statistics.median(walls[n])*1e6:7.1f} / {min(walls[n])*1e6:7.1f}")
