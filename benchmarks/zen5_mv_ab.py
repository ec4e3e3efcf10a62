"""A/B of two builds (two PYTHONPATHs) on matrix-vector and skinny products (M x K times K x N, N small), in
alternating subprocess rounds, NumPy in its own blocks in the same processes. Each subprocess times
coopjit.matmul and NumPy's matmul in alternating blocks of calls (THREADS=2, the default: wall time, a 0.1 s
pause before each block; THREADS=1: the calling thread's CPU time, one thread for both libraries) and returns
every block's time a call, and each worker's busy time in coopjit's launches (the launch trace: start to end of
its share; one-worker plans have none); the parent reports medians and minima over all blocks of all rounds, and
/proc/loadavg before and after. QUIET=1: each block waits (up to 10 s) for 0.2 s in which the machine's cores were
at least 90% idle (/proc/stat), so that other work on this shared machine overlaps fewer blocks. Issue 14, session 24 (helper h14mv).
    python benchmarks/zen5_mv_ab.py MAIN_SITE NEW_SITE CASE[,CASE...] ROUNDS [BLOCKS]
CASE: DTYPE:MxNxK[:VARIANT], DTYPE f32 / f64 / bf16 / i8 (bf16, i8: no NumPy block), VARIANT c (A row-major, the
default), f (A column-major), xs (x's rows two elements apart), bB (a batch of B products, A B x M x K);
session 25: v (x a 1-D vector of K), vs (x[::2] of a 1-D 2K), col (x a column of a K x 5 matrix, 2-D), bBv (a batch
of B products times one 1-D x of K), bBs (a batch of B products, each x[::2])."""
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import sys, time, json, os
import numpy as np, coopjit, ml_dtypes
sys.path.insert(0, sys.argv[3]); from _rounds import quiet_gate  # (this folder's shared helpers)
dt, shape, var = (sys.argv[1].split(":") + ["c"])[:3]; blocks = int(sys.argv[2])
m, n, k = (int(v) for v in shape.split("x"))
thr = int(os.environ.get("THREADS", "2")); clock = time.thread_time if thr == 1 else time.perf_counter
coopjit.set_num_threads(thr)
t = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "i8": np.int8}[dt]
rng = np.random.default_rng(1)
g = (lambda shape: rng.integers(-128, 128, shape).astype(t)) if dt == "i8" else (lambda shape: rng.standard_normal(shape).astype(t))
if var.startswith("b"):
    nb = int(var[1:].rstrip("vs"))
    a = g((nb, m, k))
    x = g((k,)) if var.endswith("v") else g((nb, 2 * k, n))[:, ::2] if var.endswith("s") else g((nb, k, n))
else:
    a = g((m, k))
    if var == "f": a = np.asfortranarray(a)
    x = g((k, n))
    if var == "xs": x = g((2 * k, n))[::2]
    if var == "v": x = g((k,))
    if var == "vs": x = g((2 * k,))[::2]
    if var == "col": x = g((k, 5))[:, 3:4]
ref = np.matmul(a.astype(np.float64), x.astype(np.float64))
c = coopjit.matmul(a, x)
err = np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max()
assert err <= (1e-2 if dt == "bf16" else 1e-5), err
f = {"cj": lambda: coopjit.matmul(a, x)}
if dt not in ("bf16", "i8"):
    f["np"] = lambda: np.matmul(a, x)
for g in f.values(): g()
t0 = clock(); f["cj"](); calls = max(2, min(50, int(0.01 / max(clock() - t0, 1e-6))))
import coopjit._core as core
x2 = x[..., None] if x.ndim == 1 else x
cfg = core.gemm_plan(a, x2 if a.ndim == 2 else np.broadcast_to(x2, a.shape[:1] + x2.shape[-2:]),
                     np.empty(a.shape[:-1] + (n,), np.int32 if dt == "i8" else np.float32 if dt == "bf16" else t), False,
                     [dt, dt, "i32" if dt == "i8" else "f32" if dt == "bf16" else dt], {})
if a.ndim == 3: cfg["layout"] = "batch " + cfg["layout"]
out = {"plan": "{layout} {order} mr{mr} nr{nr} b_prefetch{b_prefetch} t{threads}".format(**cfg), "cj": [], "np": [], "busy": []}
out["waits"] = 0
for i in range(blocks):
    for key in (list(f) if i % 2 == 0 else list(f)[::-1]):
        if thr > 1: time.sleep(0.1)
        if not quiet_gate(): out["waits"] += 1
        if key == "cj": core._set_launch_trace(True); core._launch_traces()
        t0 = clock()
        for _ in range(calls):
            f[key]()
        out[key].append((clock() - t0) / calls)
        if key == "cj":
            for tr in core._launch_traces():
                out["busy"] += [(e - s) * 1e-9 for s, e in zip(tr["start_ns"], tr["end_ns"])]
            core._set_launch_trace(False)
print(json.dumps(out))
'''
paths = {"main": sys.argv[1], "new": sys.argv[2]}
cases = sys.argv[3].split(",")
rounds = int(sys.argv[4])
blocks = int(sys.argv[5]) if len(sys.argv) > 5 else 4
thr = os.environ.get("THREADS", "2")
for case in cases:
    res = {key: {"cj": [], "np": [], "busy": []} for key in paths}
    plans = {}
    waits = 0
    l0 = open("/proc/loadavg").read().split()[0]
    for r in range(rounds):
        for key in (list(paths) if r % 2 == 0 else list(paths)[::-1]):
            env = dict(os.environ, PYTHONPATH=paths[key])
            o = json.loads(subprocess.run([sys.executable, "-c", CHILD, case, str(blocks), os.path.dirname(os.path.abspath(__file__))], env=env, capture_output=True,
                                          text=True, check=True, cwd="/tmp").stdout)
            plans[key] = o.pop("plan")
            waits += o.pop("waits")
            for kk in o:
                res[key][kk] += o[kk]
    l1 = open("/proc/loadavg").read().split()[0]
    med = {key: {kk: statistics.median(v) if v else float("nan") for kk, v in d.items()} for key, d in res.items()}
    mn = {key: {kk: min(v) if v else float("nan") for kk, v in d.items()} for key, d in res.items()}
    print(f"{case} (M x N x K), {thr} thread(s) ({'CPU time' if thr == '1' else 'wall'}), {rounds} rounds x {blocks} blocks a build, "
          f"load {l0} -> {l1}" + (f", quiet gate ({waits} blocks ran without a quiet 0.2 s)" if os.environ.get("QUIET") == "1" else ""))
    for key in paths:
        print(f"  {key:4} [{plans[key]}]: coopjit median {med[key]['cj'] * 1e6:7.0f} us min {mn[key]['cj'] * 1e6:7.0f}   "
              f"numpy median {med[key]['np'] * 1e6:7.0f} min {mn[key]['np'] * 1e6:7.0f}   numpy/coopjit median "
              f"{med[key]['np'] / med[key]['cj']:.2f} min {mn[key]['np'] / mn[key]['cj']:.2f}")
    if res["main"]["busy"] and res["new"]["busy"]:
        print(f"  a worker's busy time (launch trace): main median {med['main']['busy'] * 1e6:7.0f} us min {mn['main']['busy'] * 1e6:7.0f}   "
              f"new median {med['new']['busy'] * 1e6:7.0f} min {mn['new']['busy'] * 1e6:7.0f}   main/new median "
              f"{med['main']['busy'] / med['new']['busy']:.2f}")
    print(f"  main/new coopjit: median {med['main']['cj'] / med['new']['cj']:.2f}  min {mn['main']['cj'] / mn['new']['cj']:.2f}",
          flush=True)
