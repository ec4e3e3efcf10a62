"""bf16 / int8 / f32 matrix-vector and few-row products: plan variants (compile_gemm(..., plan=)._core.run)
against torch.matmul (bf16) / numpy.matmul (f32), blocks of calls alternating, with the operand bytes read
over the call's time (GB/s). THR=1: CPU time of the calling thread; THR=2: wall after 0.3 s pauses.
Best and median of ROUNDS. Issue 14, session 20.
    THR=1 ROUNDS=5 python benchmarks/zen4_gemv_lowp.py 1x4096x4096 bf16 '{};{"order":"k_outer","kt":8}'"""
import os, sys, time, json
import numpy as np, torch, ml_dtypes
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
    ref = a.astype(np.int64) @ b.astype(np.int64); ct = np.int32; tol = 0
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    peer = ("torch(f32 mm of int8 values)", None)
    fa, fb = torch.from_numpy(a.astype(np.float32)), torch.from_numpy(b.astype(np.float32))
    peer = ("torch f32", lambda: torch.matmul(fa, fb))
elif dt in ("bf16", "bf16f32"):
    a = rng.standard_normal((m, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    ref = a.astype(np.float64) @ b.astype(np.float64); ct = ml_dtypes.bfloat16 if dt == "bf16" else np.float32; tol = 2e-2
    ta = torch.from_numpy(a.astype(np.float32)).bfloat16(); tb = torch.from_numpy(b.astype(np.float32)).bfloat16()
    peer = ("torch", lambda: torch.matmul(ta, tb))
else:
    a = rng.standard_normal((m, k), dtype=np.float32); b = rng.standard_normal((k, n), dtype=np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64); ct = np.float32; tol = 1e-4
    cnp = np.empty((m, n), np.float32); peer = ("numpy", lambda: np.matmul(a, b, out=cnp))
nbytes = a.nbytes + b.nbytes
fns = {}
for p in plans:
    kern = coopjit.compile_gemm(m, n, k, a.dtype, plan=p or None, out_dtype=ct)
    c = np.empty((m, n), ct)
    f = (lambda kern=kern, c=c: kern._core.run(a, b, c, 1.0, 0.0))
    f(); err = np.abs(c.astype(np.float64) - ref).max() / max(1, np.abs(ref).max())
    assert err <= tol, (p, err)
    d = dict(kern.config)
    key = json.dumps(p) + f" [{d['order']} mr{d['mr']} nr{d['nr']} kt{d['kt']} vnni{d['vnni']} pack{int(d['pack'])} t{d['threads']}]"
    fns[key] = f
fns[peer[0]] = peer[1]
for f in fns.values(): f()
t = time.perf_counter(); peer[1](); calls = max(2, int(0.1 / (time.perf_counter() - t)))
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
    print(f"  {kk:>70}: best {min(v)*1e6:8.1f} us median {np.median(v)*1e6:8.1f} us {nbytes/np.median(v)/1e9:5.1f} GB/s  peer/this med {np.median(pt)/np.median(v):4.2f}", flush=True)
