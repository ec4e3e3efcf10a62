"""Skinny, GEMV and small f32 products on many cores (issue 14, session 22): plan variants through
plan= against NumPy / torch in the same run, each timed in blocks of calls after a pause, medians of
rounds (the libraries alternate within each round); then the pool's launch trace of each variant
(the last launch's workers: busy median / max / min, ms).

  python benchmarks/skinny_16core_s22.py [gemv|rows|small|shares|all]     (SHRINK=8: a dry run, shapes / 8)
Recorded: benchmarks/recorded/issue14-emr16-skinny-session22.txt."""
import os, sys, time
import numpy as np
import torch
import coopjit
from coopjit import _core
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rounds import timed

T = int(os.environ.get("THREADS", os.cpu_count()))
torch.set_num_threads(T)
coopjit.set_num_threads(T)
PART = sys.argv[1] if len(sys.argv) > 1 else "all"
S = int(os.environ.get("SHRINK", "1"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
rng = np.random.default_rng(0)
KEYS = ("order", "mr", "nr", "kt", "threads", "split", "pack", "inline_b", "ksplit", "b_prefetch", "mc_tiles")


def trace(f, reps=5):
    _core._set_launch_trace(True); rows = []
    for _ in range(reps):
        t0 = time.perf_counter_ns(); f(); t1 = time.perf_counter_ns()
        tr = _core._launch_trace(); d = np.array(tr["end_ns"]) - np.array(tr["start_ns"])
        st = np.array(tr["start_ns"]) - min(tr["start_ns"]) if len(tr["start_ns"]) else np.zeros(1)
        rows.append((t1 - t0, np.median(d), d.max(), d.min(), tr["workers"], st.max()))
    _core._set_launch_trace(False)
    return np.median(np.array(rows, float), axis=0)


def section(title, a, b, variants, work, unit, extra=()):
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    m, k = a.shape; n = b.shape[1]
    r64 = a.astype(np.float64) @ b.astype(np.float64)
    for v in variants:
        c = coopjit.matmul(a, b, plan=v)
        e = float(np.abs(c - r64).max() / np.abs(r64).max())
        cfg = coopjit.compile_gemm(m, n, k, a.dtype, plan=v).config
        print(f"  {title} {v}: err {e:.1e} [{' '.join(f'{kk}={cfg[kk]}' for kk in KEYS)}]", flush=True)
    fns = [(str(v), (lambda v=v: coopjit.matmul(a, b, plan=v))) for v in variants] + list(extra) + \
          [("numpy", lambda: a @ b), ("torch", lambda: torch.matmul(ta, tb))]
    res = {nm: [] for nm, _ in fns}
    for _ in range(ROUNDS):
        for nm, f in fns:
            time.sleep(0.3)
            res[nm].append(timed(f, 5, 0.1))
    tnp = np.median(res["numpy"])
    for nm, _ in fns:
        t = float(np.median(res[nm]))
        rate = f"{work / t / 1e9:8.1f} {unit}" if work else ""
        print(f"{title:18} {nm:52} {t*1e6:9.1f} us {rate} {tnp/t:5.2f}x numpy  (rounds {' '.join(f'{x*1e6:.0f}' for x in res[nm])})", flush=True)
    for v in variants:
        if coopjit.compile_gemm(m, n, k, a.dtype, plan=v).config["threads"] > 1:
            t_ = trace(lambda: coopjit.matmul(a, b, plan=v))
            print(f"  trace {title} {str(v):44} call {t_[0]/1e3:8.1f} us  {int(t_[4])} workers busy med/max/min "
                  f"{t_[1]/1e3:7.1f}/{t_[2]/1e3:7.1f}/{t_[3]/1e3:7.1f} us  last start {t_[5]/1e3:6.1f} us", flush=True)


f32 = np.float32
print(f"coopjit {coopjit.__version__} numpy {np.__version__} torch {torch.__version__} threads {T}", flush=True)
if PART in ("all", "gemv"):
    k, n = 4096 // S, 4096 // S
    a = rng.standard_normal((1, k)).astype(f32); b = rng.standard_normal((k, n)).astype(f32)
    V = [None, {"threads": 16}, {"threads": 16, "kt": 16}, {"threads": 16, "kt": 128}, {"threads": 8},
         {"order": "k_outer", "threads": 16, "ksplit": 16}, {"order": "k_outer", "threads": 16, "ksplit": 16, "kt": 32}, {"order": "k_outer", "threads": 8, "ksplit": 8},
         {"order": "k_outer", "threads": 16, "b_prefetch": 1024}]
    section(f"f32 1x{k}x{n}", a, b, V, b.nbytes, "GB/s")
    a = rng.standard_normal((n, k)).astype(f32); x = rng.standard_normal((k, 1)).astype(f32)
    section(f"f32 {n}x{k}x1", a, x, [None, {"threads": 12}], a.nbytes, "GB/s")
if PART in ("all", "rows"):
    k, n = 4096 // S, 4096 // S
    a = rng.standard_normal((64, k)).astype(f32); b = rng.standard_normal((k, n)).astype(f32)
    section(f"f32 64x{k}x{n}", a, b, [None, {"threads": 12}, {"kt": 256}, {"pack": 0, "order": "k_outer"},
                                      {"pack": 0, "order": "k_outer", "threads": 12}], 2.0 * 64 * k * n, "GF/s")
    a = rng.standard_normal((n, k)).astype(f32); b = rng.standard_normal((k, 64)).astype(f32)
    section(f"f32 {n}x{k}x64", a, b, [None, {"kt": 128}, {"kt": 64}, {"threads": 12}, {"mr": 8},
                                      {"pack": 1, "split": "dp"}], 2.0 * 64 * k * n, "GF/s")
if PART == "shares":  # the shares of the dot / m_inner walks (all through plan=, so the same path)
    k, n = 4096 // S, 4096 // S
    a = rng.standard_normal((n, k)).astype(f32); x = rng.standard_normal((k, 1)).astype(f32)
    section(f"f32 {n}x{k}x1", a, x, [{"shares": 1}, {"shares": 2}, {"shares": 4}, {"shares": 8}], a.nbytes, "GB/s")
    b = rng.standard_normal((k, 64)).astype(f32)
    section(f"f32 {n}x{k}x64", a, b, [{"shares": 1}, {"shares": 2}, {"shares": 4}], 2.0 * 64 * k * n, "GF/s")
if PART in ("all", "small"):
    for s in (32, 64):
        a = rng.standard_normal((s, s)).astype(f32); b = rng.standard_normal((s, s)).astype(f32); o = np.empty((s, s), f32)
        ex = [("_core.matmul_fast(a, b)", lambda: _core.matmul_fast(a, b)),
              ("coopjit.matmul(out=)", lambda: coopjit.matmul(a, b, out=o))]
        section(f"f32 {s}^3", a, b, [None, {"threads": 2}], 2.0 * s**3, "GF/s", extra=ex)
    a = np.ones((1, 1), f32)
    for nm, f in [("coopjit 1x1x1", lambda: coopjit.matmul(a, a)), ("numpy 1x1x1", lambda: a @ a),
                  ("_core.matmul_fast 1x1x1", lambda: _core.matmul_fast(a, a))]:
        print(f"  {nm:30} {np.median([timed(f, 5, 0.05) for _ in range(3)])*1e6:7.2f} us", flush=True)
