"""One thread, CPU time (thread_time): bf16 n^3 through coopjit (default, prepacked B, f32 C, plan=
overrides) and torch.matmul with torch.set_num_threads(1): the kernel against torch's without threads.
Issue 14, session 21.
    python benchmarks/zen4_one_thread_bf16.py 256,512,1024 ['{"name": {plan fields}, ...}']"""
import sys, time, json, numpy as np, ml_dtypes, coopjit, torch
coopjit.set_num_threads(1); torch.set_num_threads(1)
sizes = [int(x) for x in sys.argv[1].split(",")]
plans = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
print(open("/proc/loadavg").read().strip())
def tm(f, reps=7):
    f(); t = time.perf_counter(); f(); el = time.perf_counter() - t
    calls = max(2, int(0.05 / max(el, 1e-6)))
    best = []
    for _ in range(reps):
        t = time.thread_time()
        for _ in range(calls): f()
        best.append((time.thread_time() - t) / calls)
    return float(np.median(best))
for n in sizes:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16); tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
    c = np.empty((n, n), ml_dtypes.bfloat16)
    res = {"torch": tm(lambda: torch.matmul(ta, tb)), "cj": tm(lambda: coopjit.matmul(a, b, out=c))}
    pb = coopjit.prepack(b)
    res["cj_prepackB"] = tm(lambda: coopjit.matmul(a, pb, out=c))
    c32 = np.empty((n, n), np.float32)
    res["cj_f32C"] = tm(lambda: coopjit.matmul(a, b, out_dtype=np.float32))
    for name, pl in plans.items():
        res[name] = tm(lambda: coopjit.matmul(a, b, out=c, plan=pl))
    fl = 2 * n**3
    print(n, "  ".join(f"{k} {v*1e6:.0f}us/{fl/v/1e9:.0f}GF" for k, v in res.items()))
