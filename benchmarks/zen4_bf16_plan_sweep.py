"""bf16 n^3 under plan overrides, interleaved rounds, CPU time of the calling thread (one thread by
default), medians of rounds; each plan checked against NumPy first. Issue 14, session 21.
    python benchmarks/zen4_bf16_plan_sweep.py 1024 '{"default": {}, "kt512": {"kt": 512}}' [THREADS] [ROUNDS]"""
import sys, time, json, numpy as np, ml_dtypes, coopjit
coopjit.set_num_threads(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
n = int(sys.argv[1]); plans = json.loads(sys.argv[2]); rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
rng = np.random.default_rng(1)
a = rng.standard_normal((n, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
b = rng.standard_normal((n, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
c = np.empty((n, n), ml_dtypes.bfloat16)
ref = a.astype(np.float64) @ b.astype(np.float64)
ks = {}
for name, pl in plans.items():
    ks[name] = coopjit.compile_gemm(n, n, n, ml_dtypes.bfloat16, plan=pl or None)
    ks[name](a, b, c); err = np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max(); assert err < 1e-2, (name, err)
t = time.perf_counter(); ks[next(iter(ks))](a, b, c); calls = max(2, int(0.05 / (time.perf_counter() - t)))
res = {k: [] for k in ks}
print(open("/proc/loadavg").read().strip())
for r in range(rounds):
    for name, k in ks.items():
        k(a, b, c); t = time.thread_time()
        for _ in range(calls): k(a, b, c)
        res[name].append((time.thread_time() - t) / calls)
for name in ks:
    cf = ks[name].config
    m = np.median(res[name])
    print(f"{n} {name:>24}: {m*1e6:8.0f} us {2*n**3/m/1e9:5.0f} GF/s  [mr{cf['mr']} nr{cf['nr']} kt{cf['kt']} mc{cf['mc_tiles']} inl{cf['inline_b']} nc{cf['nc_tiles']} kin{cf['k_inner']}]")
