"""A/B of two builds (two PYTHONPATHs) on f32 vector-matrix products (1 x K times K x N, row-major), 2 threads,
in alternating subprocess rounds, numpy.dot (OpenBLAS, 2 threads) in the same processes. Each subprocess times
coopjit.matmul and numpy.dot in alternating blocks of calls (wall time, a 0.1 s pause before each block) and
returns every block's time a call; the parent reports medians and minima over all blocks of all rounds, and
/proc/loadavg before and after. Issue 14, session 23 (helper h14gemv).
    python benchmarks/zen5_gemv_ab.py MAIN_SITE NEW_SITE 1x4096x4096,1x2048x2048 ROUNDS [BLOCKS [PLAN_JSON]]
(PLAN_JSON: coopjit's calls through plan=, e.g. '{"ksplit": 8}'.)"""
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import sys, time, json
import numpy as np, coopjit
m, k, n = (int(v) for v in sys.argv[1].split("x")); blocks = int(sys.argv[2]); plan = json.loads(sys.argv[3])
coopjit.set_num_threads(2)
rng = np.random.default_rng(1)
a = rng.standard_normal((m, k), dtype=np.float32); b = rng.standard_normal((k, n), dtype=np.float32)
ref = a.astype(np.float64) @ b.astype(np.float64)
c = coopjit.matmul(a, b, plan=plan); assert np.abs(c - ref).max() <= 1e-5 * np.abs(ref).max()
cn = np.empty((m, n), np.float32)
f = {"cj": lambda: coopjit.matmul(a, b, plan=plan), "np": lambda: np.dot(a, b, out=cn)}
f["cj"](); f["np"]()
t = time.perf_counter(); f["cj"](); calls = max(2, min(50, int(0.01 / (time.perf_counter() - t))))
cfg = dict(coopjit.compile_gemm(m, n, k, np.float32, plan=plan).config)
out = {"plan": "{order} kt{kt} ksplit{ksplit} b_prefetch{b_prefetch} t{threads}".format(**cfg), "cj": [], "np": []}
for i in range(blocks):
    for key in (("cj", "np") if i % 2 == 0 else ("np", "cj")):
        time.sleep(0.1)
        t = time.perf_counter()
        for _ in range(calls):
            f[key]()
        out[key].append((time.perf_counter() - t) / calls)
print(json.dumps(out))
'''
paths = {"main": sys.argv[1], "new": sys.argv[2]}
shapes = sys.argv[3].split(",")
rounds = int(sys.argv[4])
blocks = int(sys.argv[5]) if len(sys.argv) > 5 else 4
plan = sys.argv[6] if len(sys.argv) > 6 else "null"
for shape in shapes:
    res = {key: {"cj": [], "np": []} for key in paths}
    plans = {}
    l0 = open("/proc/loadavg").read().split()[0]
    for r in range(rounds):
        for key in (list(paths) if r % 2 == 0 else list(paths)[::-1]):
            env = dict(os.environ, PYTHONPATH=paths[key])
            o = json.loads(subprocess.run([sys.executable, "-c", CHILD, shape, str(blocks), plan], env=env, capture_output=True,
                                          text=True, check=True, cwd="/tmp").stdout)
            plans[key] = o.pop("plan")
            for kk in o:
                res[key][kk] += o[kk]
    l1 = open("/proc/loadavg").read().split()[0]
    med = {key: {kk: statistics.median(v) for kk, v in d.items()} for key, d in res.items()}
    mn = {key: {kk: min(v) for kk, v in d.items()} for key, d in res.items()}
    print(f"f32 {shape} (M x K x N) plan={plan}, 2 threads (wall), {rounds} rounds x {blocks} blocks a build, load {l0} -> {l1}")
    for key in paths:
        print(f"  {key:4} [{plans[key]}]: coopjit median {med[key]['cj'] * 1e6:7.0f} us min {mn[key]['cj'] * 1e6:7.0f}   "
              f"numpy median {med[key]['np'] * 1e6:7.0f} min {mn[key]['np'] * 1e6:7.0f}   numpy/coopjit median "
              f"{med[key]['np'] / med[key]['cj']:.2f} min {mn[key]['np'] / mn[key]['cj']:.2f}")
    print(f"  main/new coopjit: median {med['main']['cj'] / med['new']['cj']:.2f}  min {mn['main']['cj'] / mn['new']['cj']:.2f}",
          flush=True)
