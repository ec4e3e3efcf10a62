"""The column_rows step A/B on 2 threads (session 28): wall time and the process CPU time a call, medians of 9 blocks.
   for r in 1..7: for SITE in main branch: PYTHONPATH=SITE python benchmarks/column_rows_ab_s28.py"""
import sys, time, numpy as np, coopjit
sys.path.insert(0, "/work/wt/hzen/benchmarks")
from zen5_rows_s28 import timed
coopjit.set_num_threads(2)
for shape, dt, op in [((8192, 768), "f4", "sum"), ((2048, 2048), "f4", "max"), ((2048, 2048), "f4", "sum"), ((4096, 1024), "f4", "sum")]:
    x = np.random.default_rng(0).standard_normal(shape).astype(dt)
    time.sleep(0.1)
    w = timed(lambda: coopjit.reduce(x, axis=0, op=op), time.perf_counter, blocks=9, seconds=0.4) * 1e6
    c = timed(lambda: coopjit.reduce(x, axis=0, op=op), time.process_time, blocks=9, seconds=0.4) * 1e6
    print(f"{op} {dt} {shape}: {w:.0f} us wall, {c:.0f} us process CPU", flush=True)
