"""GEMM rows: plan variants (compile_gemm(..., plan=)._core.run) against numpy.matmul (f32) or torch._int_mm
(int8), blocks of calls alternating; 2 threads: wall after 0.3 s pauses; THR=1: CPU time of the calling thread
(run with OPENBLAS_NUM_THREADS=1 so NumPy is on one thread too); best and median of ROUNDS. Issue 14, session 19.
    THR=1 ROUNDS=5 OPENBLAS_NUM_THREADS=1 python benchmarks/zen4_gemm_plans.py 64x4096x4096 f32 '{};{"mr":8,"nr":48}'
Recorded: benchmarks/recorded/issue14-zen4-2core-bw-session19.txt."""
import os, sys, time, json
import numpy as np, torch
import coopjit
def load():
    return open("/proc/loadavg").read().split()[0]
thr = int(os.environ.get("THR", 2)); rounds = int(os.environ.get("ROUNDS", 7))
coopjit.set_num_threads(thr); torch.set_num_threads(thr)
clock = time.thread_time if thr == 1 else time.perf_counter
m, n, k = (int(v) for v in sys.argv[1].split("x")); dt = sys.argv[2]
plans = [json.loads(p) for p in sys.argv[3].split(";")] if len(sys.argv) > 3 else [{}]
rng = np.random.default_rng(1)
if dt == "int8":
    a = rng.integers(-128, 128, (m, k), dtype=np.int8); b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b); peer = ("torch", lambda: torch._int_mm(ta, tb))
    ref = a.astype(np.int64) @ b.astype(np.int64)
else:
    a = rng.standard_normal((m, k), dtype=np.float32); b = rng.standard_normal((k, n), dtype=np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    cnp = np.empty((m, n), np.float32); peer = ("numpy", lambda: np.matmul(a, b, out=cnp))
fns = {}
for p in plans:
    kern = coopjit.compile_gemm(m, n, k, a.dtype, plan=p or None)
    c = np.empty((m, n), np.int32 if dt == "int8" else np.float32)
    f = (lambda kern=kern, c=c: kern._core.run(a, b, c, 1.0, 0.0))
    f(); err = np.abs(c - ref).max() / max(1, np.abs(ref).max())
    assert err < 1e-4, (p, err)
    fns[json.dumps(p)] = f
fns[peer[0]] = peer[1]
for f in fns.values(): f()
t = time.perf_counter(); peer[1](); calls = max(1, int(0.15 / (time.perf_counter() - t)))
res = {kk: [] for kk in fns}
l0 = load()
for r in range(rounds):
    items = list(fns.items()); items = items if r % 2 == 0 else items[::-1]
    for kk, f in items:
        if thr > 1: time.sleep(0.3)
        f(); t = clock()
        for _ in range(calls): f()
        res[kk].append((clock() - t) / calls)
pt = res[peer[0]]
print(f"{m}x{n}x{k} {dt} thr {thr} ({'thread_time' if thr == 1 else 'wall'}), {rounds} rounds x {calls} calls, load {l0} -> {load()}")
for kk, v in res.items():
    print(f"  {kk:>40}: best {min(v)*1e6:9.1f} us median {np.median(v)*1e6:9.1f} us  peer/this best {min(pt)/min(v):4.2f} median {np.median(pt)/np.median(v):4.2f}", flush=True)
