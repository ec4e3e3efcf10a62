"""f32 / f64 GEMM on many cores (issue 14, session 15): the blocked nest's orders and tiles through
plan=, one thread and all 16, against the default of the same run and torch (16 threads); each
variant in its own block after a 0.5 s pause, medians of rounds; the pool's launch trace (per
share: the compute launch's workers) for 4096^3. mc_tiles=4096 (one block of all the worker's
row panels) walks the tiles in the order of the later default nc_tiles=1; {"nc_tiles": 0} is the
session 14 default.

    python benchmarks/f32_blocking_probe.py [all | one | 16]

Recorded: benchmarks/recorded/issue14-emr16-f32-session15.txt (the 16-core Emerald Rapids host)."""
import sys, time
import numpy as np
import coopjit
from _rounds import timed
from coopjit import _core

pk = coopjit.peak()
P1, P16 = pk["f32_fma"]["single"], pk["f32_fma"]["all"]
print(f"peak f32 1 thread {P1:.0f} / {pk['f32_fma']['threads']} threads {P16:.0f} GF/s; cpu {coopjit.cpu_info().get('name')}", flush=True)
import torch
torch.set_num_threads(16)
rng = np.random.default_rng(0)
def ops(n, dt):
    a = rng.standard_normal((n, n)).astype(dt); b = rng.standard_normal((n, n)).astype(dt)
    return a, b
def err(c, a, b):
    r = a[:64].astype(np.float64) @ b.astype(np.float64)
    return float(np.abs(c[:64] - r).max() / np.abs(r).max())
def cfg(n, dt, plan):
    c = coopjit.compile_gemm(n, n, n, dt, plan=plan).config
    return " ".join(f"{k}={c[k]}" for k in ("mr", "nr", "kt", "mc_tiles", "grid_m", "shares", "threads"))

def section(title, n, dt, variants, threads, rounds, blocks=5, trace=False):
    coopjit.set_num_threads(threads)
    a, b = ops(n, dt)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    peak = (P1 if threads == 1 else P16) / (2 if dt == np.float64 else 1)
    res = {str(v): [] for v in variants}; res["torch"] = []
    for v in variants:
        c = coopjit.matmul(a, b, plan=v)
        print(f"  {title} {v}: err {err(c, a, b):.1e} [{cfg(n, dt, v)}]", flush=True)
    for r in range(rounds):
        for v in variants + ["torch"]:
            time.sleep(0.5)
            if v == "torch":
                if threads != 16: continue
                res["torch"].append(timed(lambda: torch.matmul(ta, tb), blocks))
            else:
                res[str(v)].append(timed(lambda: coopjit.matmul(a, b, plan=v), blocks))
    base = np.median(res[str(variants[0])])
    for k, ts in res.items():
        if not ts: continue
        t = float(np.median(ts)); g = 2 * n**3 / t / 1e9
        print(f"{title:22} {k:44} {t*1e3:9.2f} ms {g:8.1f} GF/s {g/peak*100:5.1f}% peak  {base/t:5.2f}x first  (rounds {' '.join(f'{x*1e3:.1f}' for x in ts)})", flush=True)
    if trace:
        for v in variants:
            _core._set_launch_trace(True); rows = []
            for _ in range(5):
                t0 = time.perf_counter_ns(); coopjit.matmul(a, b, plan=v); t1 = time.perf_counter_ns()
                tr = _core._launch_trace(); st, en = np.array(tr["start_ns"]), np.array(tr["end_ns"])
                d = en - st; rows.append((t1 - t0, tr["join_ns"], np.median(d), d.max(), d.min()))
            _core._set_launch_trace(False)
            m = np.median(np.array(rows, float), axis=0) / 1e6
            print(f"  trace {title} {str(v):44} call {m[0]:8.2f} ms  last launch {m[1]:8.2f}  worker med/max/min {m[2]:7.2f}/{m[3]:7.2f}/{m[4]:7.2f}", flush=True)

which = sys.argv[1] if len(sys.argv) > 1 else "all"
f32, f64 = np.float32, np.float64
M4 = {"mc_tiles": 4096}
if which in ("all", "one"):
    section("f32 2048^3 1thr", 2048, f32, [{"threads": 1}, dict(M4, threads=1), dict(M4, threads=1, kt=2048),
            {"threads": 1, "mr": 14, "nr": 32}, dict(M4, threads=1, mr=14, nr=32), dict(M4, threads=1, mr=8, nr=48)], 1, 2)
if which in ("all", "16"):
    section("f32 4096^3 16thr", 4096, f32, [{}, M4, dict(M4, kt=2048), dict(M4, kt=4096), {"mc_tiles": 48},
            dict(M4, mr=14, nr=32), dict(M4, shares=1), dict(M4, kt=2048, shares=1), {"threads": 1, "mc_tiles": 4096, "kt": 4096}][:8], 16, 3, trace=True)
    section("f32 1024^3 16thr", 1024, f32, [{}, M4, dict(M4, shares=1)], 16, 3)
    section("f32 2048^3 16thr", 2048, f32, [{}, M4, dict(M4, kt=2048)], 16, 3)
    section("f32 8192^3 16thr", 8192, f32, [{}, M4, dict(M4, kt=2048)], 16, 2, blocks=3)
    section("f64 4096^3 16thr", 4096, f64, [{}, M4, dict(M4, kt=2048)], 16, 2)
