"""A/B of two builds (two PYTHONPATHs) in alternating subprocess rounds: bf16 / f16 (torch.matmul the peer), f32
(numpy.matmul) or int8 (no peer for M < 17: torch.matmul of the f32 values) products through coopjit.matmul.
Each round: one subprocess per build (order alternating) timing coopjit and the peer, each a block of calls
(2 threads: wall after a 0.5 s pause; 1 thread: CPU time of the calling thread, OpenBLAS on one thread), the
best of 3 blocks; medians (and bests) over rounds, /proc/loadavg before and after. Issue 14, session 20.
    python benchmarks/zen4_ab_lowp.py MAIN_SITE NEW_SITE 1x4096x4096,4096x1x4096 bf16 THREADS ROUNDS"""
import os, subprocess, sys, json, statistics
CHILD = r'''
import os, sys, time, json
import numpy as np, torch, ml_dtypes, coopjit
thr = int(sys.argv[1]); m, n, k = (int(v) for v in sys.argv[2].split("x")); dt = sys.argv[3]
coopjit.set_num_threads(thr); torch.set_num_threads(thr)
clock = time.thread_time if thr == 1 else time.perf_counter
rng = np.random.default_rng(1)
if dt == "int8":
    a = rng.integers(-128, 128, (m, k), dtype=np.int8); b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    ta, tb = torch.from_numpy(a.astype(np.float32)), torch.from_numpy(b.astype(np.float32))
    peer = lambda: torch.matmul(ta, tb)
    ref = a.astype(np.int64) @ b.astype(np.int64); tol = 0
else:
    a = rng.standard_normal((m, k), dtype=np.float32); b = rng.standard_normal((k, n), dtype=np.float32)
    if dt in ("bf16", "f16"):
        a, b = (a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)) if dt == "bf16" else (a.astype(np.float16), b.astype(np.float16))
        tt = torch.bfloat16 if dt == "bf16" else torch.float16
        ta = torch.from_numpy(a.astype(np.float32)).to(tt); tb = torch.from_numpy(b.astype(np.float32)).to(tt)
        peer = lambda: torch.matmul(ta, tb)
    else:
        cn = np.empty((m, n), np.float32); peer = lambda: np.matmul(a, b, out=cn)
    ref = a.astype(np.float64) @ b.astype(np.float64); tol = 2e-2 if dt in ("bf16", "f16") else 1e-4
c = coopjit.matmul(a, b); assert np.abs(c.astype(np.float64) - ref).max() <= tol * np.abs(ref).max()
t = time.perf_counter(); coopjit.matmul(a, b); calls = max(2, min(20, int(0.05 / (time.perf_counter() - t))))
out = {"plan": "{order} mr{mr} nr{nr} kt{kt} ksplit{ksplit} t{threads}".format(**dict(coopjit.compile_gemm(m, n, k, a.dtype).config))}
for key, f in (("cj", lambda: coopjit.matmul(a, b)), ("peer", peer)):
    f(); best = []
    for rep in range(3):
        if thr > 1: time.sleep(0.5)
        t = clock()
        for _ in range(calls): f()
        best.append((clock() - t) / calls)
    out[key] = min(best)
print(json.dumps(out))
'''
paths = {"main": sys.argv[1], "new": sys.argv[2]}
shapes = sys.argv[3].split(","); dt = sys.argv[4]; thr = int(sys.argv[5]); rounds = int(sys.argv[6])
for shape in shapes:
    res = {k: {"cj": [], "peer": []} for k in paths}
    plans = {}
    l0 = open("/proc/loadavg").read().split()[0]
    for r in range(rounds):
        order = list(paths) if r % 2 == 0 else list(paths)[::-1]
        for key in order:
            env = dict(os.environ, PYTHONPATH=paths[key])
            if thr == 1: env["OPENBLAS_NUM_THREADS"] = "1"
            o = json.loads(subprocess.run([sys.executable, "-c", CHILD, str(thr), shape, dt], env=env, capture_output=True,
                                          text=True, check=True, cwd="/tmp").stdout)
            plans[key] = o.pop("plan")
            for kk in o: res[key][kk].append(o[kk])
    l1 = open("/proc/loadavg").read().split()[0]
    med = {k: {kk: statistics.median(v) for kk, v in d.items()} for k, d in res.items()}
    mn = {k: {kk: min(v) for kk, v in d.items()} for k, d in res.items()}
    print(f"{dt} {shape}, {thr} thread(s) ({'CPU time' if thr == 1 else 'wall'}), {rounds} rounds, load {l0} -> {l1}: "
          f"main [{plans['main']}] {med['main']['cj']*1e6:.0f} us (peer {med['main']['peer']*1e6:.0f}, peer/cj {med['main']['peer']/med['main']['cj']:.2f}) -> "
          f"new [{plans['new']}] {med['new']['cj']*1e6:.0f} us (peer {med['new']['peer']*1e6:.0f}, peer/cj {med['new']['peer']/med['new']['cj']:.2f}); "
          f"main/new {med['main']['cj']/med['new']['cj']:.2f} (medians); best main {mn['main']['cj']*1e6:.0f} new {mn['new']['cj']*1e6:.0f} peer {min(mn['main']['peer'], mn['new']['peer'])*1e6:.0f} us", flush=True)
