"""Plan variants of the shapes issue 14 found weak on 16 cores, timed in interleaved rounds (each variant in its own block after a pause; medians of 5 rounds), NumPy and torch in the same rounds. The host of the accelerator machine is noisy (the same plan measured 392 and 467 us in one run): trust only differences that repeat. Run: python benchmarks/grid_sweep.py [CASE ...] (substrings of "f32 1x4096x4096")"""
import sys, time, json
import numpy as np, coopjit
import ml_dtypes
try:
    import torch
    torch.set_num_threads(coopjit.get_num_threads())
except Exception:
    torch = None

def block(f, seconds=0.08):
    f()
    t = time.perf_counter(); f(); one = max(time.perf_counter() - t, 1e-6)
    n = max(1, int(seconds / one))
    t = time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter() - t) / n

def ops(dt, m, n, k, rng):
    if dt == "int8":
        return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    if dt == "bf16": return a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    return a, b

T = [{"threads": t} for t in (1, 2, 4, 8, 12)]
CASES = [
    ("f32", 1, 4096, 4096, T + [{"kt": 64}, {"kt": 256}, {"threads": 8, "kt": 256}]),
    ("f32", 4096, 1, 4096, T),
    ("f32", 16, 4096, 4096, T[3:] + [{"kt": 256}]),
    ("f32", 64, 4096, 4096, T[3:] + [{"kt": 256}, {"order": "m_inner", "pack": 1}]),
    ("f32", 4096, 64, 4096, T[3:] + [{"split": "dp"}, {"pack": 1}, {"pack": 1, "grid_m": 16}]),
    ("f32", 3000, 500, 200, T[2:] + [{"pack": 0}, {"pack": 1, "grid_m": 4}, {"pack": 1, "grid_m": 2}, {"pack": 1, "grid_m": 16}]),
    ("f32", 100, 37, 250, T[:4]),
    ("f32", 513, 129, 700, T[2:] + [{"pack": 0}]),
    ("f32", 1024, 1024, 1024, [{"grid_m": 1}, {"grid_m": 2}, {"grid_m": 8}, {"mc_tiles": 16}, {"threads": 8}]),
    ("bf16", 512, 512, 512, T[2:] + [{"kt": 256}, {"grid_m": 1}, {"grid_m": 2}]),
    ("int8", 1024, 1024, 1024, [{"grid_m": 1}, {"grid_m": 2}, {"kt": 512}, {"threads": 8}]),
    ("bf16", 1024, 1024, 1024, [{"grid_m": 1}, {"grid_m": 2}, {"kt": 256}, {"kt": 512}]),
    ("bf16", 4096, 4096, 4096, [{"grid_m": 1}, {"grid_m": 2}, {"kt": 1024}]),
    ("bf16", 512, 512, 4096, [{"threads": 1}, {"threads": 1, "kt": 256}, {"threads": 1, "kt": 512}, {"threads": 1, "kt": 1024}]),
    ("int8", 512, 512, 4096, [{"threads": 1}, {"threads": 1, "kt": 512}, {"threads": 1, "kt": 1024}, {"threads": 1, "kt": 2048}]),
]
only = sys.argv[1:]
rng = np.random.default_rng(0)
print(f"coopjit {coopjit.__version__}, {coopjit.get_num_threads()} workers, {coopjit.cpu_info()['name']}", flush=True)
for dt, m, n, k, variants in CASES:
    name = f"{dt} {m}x{n}x{k}"
    if only and not any(o in name for o in only): continue
    a, b = ops(dt, m, n, k, rng)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    fns = {}
    for plan in [None] + variants:
        try:
            kern = coopjit.compile_gemm(m, n, k, a.dtype, plan=plan)
            c = kern(a, b)
            err = float(np.abs(c.astype(np.float64) - ref).max() / max(1.0, np.abs(ref).max()))
            fns[json.dumps(plan)] = (lambda kern=kern: kern(a, b), err, kern.config)
        except Exception as e:
            print(f"  {name} {plan}: refused ({type(e).__name__}: {e})", flush=True)
    if dt == "f32":
        fns["numpy"] = (lambda: a @ b, 0, None)
    if torch is not None:
        ta, tb = torch.from_numpy(a.astype(np.float32)), torch.from_numpy(b.astype(np.float32))
        if dt == "bf16": ta, tb = ta.bfloat16(), tb.bfloat16()
        if dt == "int8":
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            fns["torch"] = (lambda: torch._int_mm(ta, tb), 0, None)
        else:
            fns["torch"] = (lambda: ta @ tb, 0, None)
    times = {key: [] for key in fns}
    for r in range(5):
        for key, (f, _, _) in fns.items():
            time.sleep(0.12)
            times[key].append(block(f))
    med = {key: float(np.median(v)) for key, v in times.items()}
    base = med.get("null")
    flop = 2.0 * m * n * k
    for key, (f, err, cfg) in fns.items():
        t = med[key]
        c = "" if cfg is None else "[" + " ".join(f"{x}={cfg[x]}" for x in ("order", "mr", "nr", "kt", "mc_tiles", "grid_m", "threads", "split", "pack", "amx") if x in cfg) + "]"
        print(f"  {name:22s} {key:38s} {t*1e6:10.1f} us {flop/t/1e9:9.1f} G/s  x{base/t if base else 0:5.2f} spread {max(times[key])/min(times[key]):4.2f} err {err:.1e} {c}", flush=True)
