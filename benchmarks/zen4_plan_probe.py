"""Plan variants of one f32 / f64 product against NumPy (issue 14, session 17): kernels through
compile_gemm(..., plan=...)._core.run (a plan= dict on each call would add 13-20 us), one thread: CPU time
(thread_time) with OpenBLAS at 1 thread (threadpoolctl); 2+: wall time after pauses; blocks alternating, medians.
Usage: python benchmarks/zen4_plan_probe.py float32 1 4096 4096 '[{}, {"b_prefetch": 0}]' [rounds] [threads]
(recorded: benchmarks/recorded/issue14-zen4-2core-rows-session17.txt)."""
import sys, json, time, numpy as np, threadpoolctl, coopjit
dt = np.dtype(sys.argv[1]); M, N, K = map(int, sys.argv[2:5]); plans = json.loads(sys.argv[5])
rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 7
thr = int(sys.argv[7]) if len(sys.argv) > 7 else 1
rng = np.random.default_rng(0)
a = rng.standard_normal((M, K)).astype(dt); b = rng.standard_normal((K, N)).astype(dt)
ref = a.astype(np.float64) @ b.astype(np.float64)
coopjit.set_num_threads(thr)
clock = time.thread_time if thr == 1 else time.perf_counter
fs = []
for p in plans:
    kern = coopjit.compile_gemm(M, N, K, dt, plan=p or None); cc = np.empty((M, N), dt)
    f = lambda kern=kern, cc=cc: kern._core.run(a, b, cc, 1.0, 0.0)
    f(); c = cc; err = np.abs(c - ref).max() / np.abs(ref).max(); assert err < (1e-4 if dt == np.float32 else 1e-12), (p, err)
    fs.append((json.dumps(p), f))
cn = np.empty((M, N), dt)
fs.append(("numpy", lambda: np.matmul(a, b, out=cn)))
t0 = time.perf_counter(); fs[-1][1](); t = time.perf_counter() - t0
n = max(1, int(0.05 / max(t, 1e-7)))
res = {k: [] for k, _ in fs}
with threadpoolctl.threadpool_limits(thr, "blas"):
    for r in range(rounds):
        order = fs if r % 2 == 0 else fs[::-1]
        for k, f in order:
            if thr > 1: time.sleep(0.3)
            f(); t0 = clock()
            for _ in range(n): f()
            res[k].append((clock() - t0) / n)
tn = np.median(res["numpy"])
for k, v in res.items():
    cfg = "" if k == "numpy" else coopjit.cross_compile(a, b, cpu="znver4", threads=thr, plan=json.loads(k) or None)["config"]
    brief = " ".join(f"{f}={cfg[f]}" for f in ("mr", "nr", "kt", "order", "pack", "inline_b", "mc_tiles", "threads", "ksplit", "b_prefetch", "fixed_shape")) if cfg else ""
    print(f"{dt.name} {M}x{N}x{K} {k:>40}: {np.median(v)*1e6:9.1f} us (min {min(v)*1e6:9.1f})  np/this {tn/np.median(v):5.2f}  {brief}", flush=True)
