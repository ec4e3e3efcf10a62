"""A/B of two builds (two PYTHONPATHs) in alternating subprocess rounds: f32 k_outer rows against NumPy.
Each round: one subprocess per build (order alternating), which times a block of calls of coopjit.matmul
and numpy.matmul (2 threads: wall after a 0.3 s pause; 1 thread: CPU time with OPENBLAS_NUM_THREADS=1), the best
of 3 blocks of 2 calls; medians (and bests) over rounds. Issue 14, session 19.
    python benchmarks/zen4_ab_builds.py MAIN_SITE NEW_SITE 64x4096x4096,16x4096x4096 THREADS ROUNDS
Recorded: benchmarks/recorded/issue14-zen4-2core-bw-session19.txt."""
import os, subprocess, sys, json, statistics
CHILD = r'''
import os, sys, time, json
import numpy as np, coopjit
thr = int(sys.argv[1]); m, n, k = (int(v) for v in sys.argv[2].split("x"))
coopjit.set_num_threads(thr)
clock = time.thread_time if thr == 1 else time.perf_counter
rng = np.random.default_rng(1)
a = rng.standard_normal((m, k), dtype=np.float32); b = rng.standard_normal((k, n), dtype=np.float32)
ref = a.astype(np.float64) @ b.astype(np.float64)
c = coopjit.matmul(a, b); assert np.abs(c - ref).max() <= 1e-4 * np.abs(ref).max()
cn = np.empty((m, n), np.float32)
out = {}
for key, f in (("cj", lambda: coopjit.matmul(a, b)), ("np", lambda: np.matmul(a, b, out=cn))):
    f(); best = []
    for rep in range(3):
        if thr > 1: time.sleep(0.3)
        t = clock(); f(); f(); best.append((clock() - t) / 2)
    out[key] = min(best)
print(json.dumps(out))
'''
paths = {"main": sys.argv[1], "new": sys.argv[2]}
shapes = sys.argv[3].split(","); thr = int(sys.argv[4]); rounds = int(sys.argv[5])
for shape in shapes:
    res = {k: {"cj": [], "np": []} for k in paths}
    loads = []
    for r in range(rounds):
        order = list(paths) if r % 2 == 0 else list(paths)[::-1]
        for key in order:
            env = dict(os.environ, PYTHONPATH=paths[key])
            if thr == 1: env["OPENBLAS_NUM_THREADS"] = "1"
            o = json.loads(subprocess.run([sys.executable, "-c", CHILD, str(thr), shape], env=env, capture_output=True,
                                          text=True, check=True, cwd="/tmp").stdout)
            for kk in o: res[key][kk].append(o[kk])
        loads.append(float(open("/proc/loadavg").read().split()[0]))
    med = {k: {kk: statistics.median(v) for kk, v in d.items()} for k, d in res.items()}
    mn = {k: {kk: min(v) for kk, v in d.items()} for k, d in res.items()}
    print(f"{shape} f32, {thr} thread(s) ({'CPU time' if thr == 1 else 'wall'}), {rounds} rounds, load {min(loads):.1f}-{max(loads):.1f}: "
          f"main {med['main']['cj']*1e3:.2f} ms (np {med['main']['np']*1e3:.2f}, np/cj {med['main']['np']/med['main']['cj']:.2f}) -> "
          f"new {med['new']['cj']*1e3:.2f} ms (np {med['new']['np']*1e3:.2f}, np/cj {med['new']['np']/med['new']['cj']:.2f}); "
          f"main/new {med['main']['cj']/med['new']['cj']:.2f} (medians); best main {mn['main']['cj']*1e3:.2f} new {mn['new']['cj']*1e3:.2f} np {min(mn['main']['np'], mn['new']['np'])*1e3:.2f}", flush=True)
