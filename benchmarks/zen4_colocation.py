"""Where a 2-worker launch's workers run: fresh process, back-to-back calls of a bf16 n^3 product,
the launch trace of each (the CPU each worker started on, the call's join, the workers' CPU time,
the pool thread's start and whether it moved off the caller's CPU). mode 0: the default (a pool
thread on its caller's CPU moves, thread_pool.cpp's spread); 2: spread off; 1: threads pinned.
Issue 14, session 21.
    for m in 2 0 1; do python benchmarks/zen4_colocation.py 256 $m 300; done"""
import sys
import numpy as np, ml_dtypes, coopjit
from coopjit import _core
coopjit.set_num_threads(2)
n = int(sys.argv[1]); mode = int(sys.argv[2]); calls = int(sys.argv[3]) if len(sys.argv) > 3 else 100
_core._set_pool_pin(mode == 1)
if hasattr(_core, "_set_pool_spread"):  # (main's build before session 21 has no spread)
    _core._set_pool_spread(mode != 2)
a = np.ones((n, n), ml_dtypes.bfloat16)
for i in range(20):
    coopjit.matmul(a, a)
_core._set_launch_trace(True)
rows = []
for i in range(calls):
    coopjit.matmul(a, a)
    rows += _core._launch_traces()
same = sum(t["cpu"][0] == t["cpu"][1] for t in rows)
med = lambda v: float(np.median(v)) / 1e3
print(open("/proc/loadavg").read().strip(), f"n={n} mode={mode}: both workers on one CPU in {same}/{len(rows)} launches; "
      f"join median {med([t['join_ns'] for t in rows]):.0f} us; workers' CPU time {med([t['cpu_time_ns'][0] for t in rows]):.0f} / "
      f"{med([t['cpu_time_ns'][1] for t in rows]):.0f} us; worker 1 starts {med([t['start_ns'][1] for t in rows]):.1f} us; "
      f"moved {sum(sum(t.get('moved', [0])) for t in rows)}", flush=True)
