"""Matrix-vector and skinny products, and f32 4096^3 / 8192^3, on many cores (issue 14, session 16):
plan variants through plan= against NumPy / torch (16 threads) in the same run, each timed in blocks
of calls after a pause, medians of rounds; then the launch trace of each variant (ThreadPool's
per-worker stamps: the last launch's workers, busy median / max / min; "before it" is the call's
time before that launch: the packing launch of packed plans, the call's own overhead otherwise).
Rates as % of coopjit.peak()'s 16-thread f32 FMA peak or its copy bandwidth.

  python benchmarks/gemv_skinny_16core.py gemv     the GEMV / skinny plan variants (session 16 run 1)
  python benchmarks/gemv_skinny_16core.py square   f32 4096^3 / 8192^3 plan variants (run 1)
  python benchmarks/gemv_skinny_16core.py confirm  the planner's choices against the old ones (run 2)
  SHRINK=8 ...                                     a dry run on shapes / 8
Recorded: benchmarks/recorded/issue14-emr16-gemv-session16.txt."""

import sys, time
import numpy as np
import coopjit
from _rounds import timed
from coopjit import _core
import torch
torch.set_num_threads(16)
coopjit.set_num_threads(16)
rng = np.random.default_rng(0)
PART = sys.argv[1] if len(sys.argv) > 1 else "all"
import os
S = int(os.environ.get("SHRINK", "1"))  # (a dry run: shapes / S)

pk = coopjit.peak()
P16, P1, COPY, COPY1 = pk["f32_fma"]["all"], pk["f32_fma"]["single"], pk["copy"]["all"], pk["copy"]["single"]
print(f"peak f32 {P1:.0f} / {P16:.0f} GF/s, copy {COPY1:.1f} / {COPY:.1f} GB/s", flush=True)


def trace(f, reps=5):
    _core._set_launch_trace(True); rows = []
    for _ in range(reps):
        t0 = time.perf_counter_ns(); f(); t1 = time.perf_counter_ns()
        tr = _core._launch_trace(); d = np.array(tr["end_ns"]) - np.array(tr["start_ns"])
        rows.append((t1 - t0, tr["join_ns"], np.median(d), d.max(), d.min(), tr["workers"], d.sum()))
    _core._set_launch_trace(False)
    return np.median(np.array(rows, float), axis=0)


def cfgs(c, keys=("order", "mr", "nr", "kt", "mc_tiles", "nc_tiles", "grid_m", "shares", "threads", "pack", "inline_b", "ksplit")):
    return " ".join(f"{k}={c[k]}" for k in keys)


def section(title, a, b, variants, rounds, blocks=5, seconds=0.1, work=None, unit="GF/s", ref=None, np_too=False, torch_too=True,
            do_trace=True):
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    m, k = a.shape; n = b.shape[1] if b.ndim == 2 else 1
    work = work if work is not None else 2.0 * m * n * k
    r64 = (a.astype(np.float64) @ b.astype(np.float64))
    for v in variants:
        c = coopjit.matmul(a, b, plan=v)
        e = float(np.abs(c - r64).max() / np.abs(r64).max())
        cfg = coopjit.compile_gemm(m, n, k, a.dtype, plan=v).config
        print(f"  {title} {v}: err {e:.1e} [{cfgs(cfg)}]", flush=True)
    names = [str(v) for v in variants] + (["numpy"] if np_too else []) + (["torch"] if torch_too else [])
    fns = [(lambda v=v: coopjit.matmul(a, b, plan=v)) for v in variants] + \
          ([lambda: a @ b] if np_too else []) + ([lambda: torch.matmul(ta, tb)] if torch_too else [])
    res = {nm: [] for nm in names}
    for r in range(rounds):
        for nm, f in zip(names, fns):
            time.sleep(0.3 if PART == "confirm" else 0.5)
            res[nm].append(timed(f, blocks, seconds))
    base = np.median(res[names[0]])
    refname = ref or names[0]
    rt = np.median(res[refname])
    for nm in names:
        t = float(np.median(res[nm])); rate = work / t / 1e9
        extra = f"{rate / P16 * 100:5.1f}% peak" if unit == "GF/s" else f"{rate / COPY * 100:5.1f}% copy"
        print(f"{title:24} {nm:52} {t*1e3:9.3f} ms {rate:8.1f} {unit} {extra} {rt/t:5.2f}x {refname}  (rounds {' '.join(f'{x*1e3:.3f}' for x in res[nm])})", flush=True)
    if do_trace:
        for v in variants:
            m_ = trace(lambda: coopjit.matmul(a, b, plan=v))
            print(f"  trace {title} {str(v):44} call {m_[0]/1e6:8.3f} ms  last launch {m_[1]/1e6:8.3f} (before it {(m_[0]-m_[1])/1e6:7.3f})"
                  f"  {int(m_[5])} workers med/max/min {m_[2]/1e6:7.3f}/{m_[3]/1e6:7.3f}/{m_[4]/1e6:7.3f}  busy {m_[6]/1e6:8.2f} ms", flush=True)
    return res


f32, f64 = np.float32, np.float64
if PART in ("all", "gemv"):
    print("## GEMV (A @ x, A C-contiguous): bytes of A a second; % of the 16-thread copy bandwidth", flush=True)
    for (m, k) in [(4096 // S, 4096 // S), (16384 // S, 4096 // S), (2048 // S, 2048 // S)]:
        a = rng.standard_normal((m, k)).astype(f32); x = rng.standard_normal((k, 1)).astype(f32)
        V = [{}, {"threads": 16}, {"threads": 8}, {"mr": 8}, {"mr": 2}, {"nr": 128}, {"threads": 16, "mr": 8}]
        section(f"gemv {m}x{k}x1", a, x, V, 3, work=a.nbytes, unit="GB/s", ref="numpy", np_too=True)
        t1 = timed(lambda: coopjit.matmul(a, x, plan={"threads": 1}), 5, 0.1, time.thread_time)
        tn = timed(lambda: np.add.reduce(a, axis=1), 5, 0.1)
        tr = timed(lambda: coopjit.reduce(a, 1), 5, 0.1)
        print(f"  gemv {m}x{k}x1 one thread (CPU time) {a.nbytes/t1/1e9:.1f} GB/s; coopjit sum axis 1 (16 thr) {a.nbytes/tr/1e9:.1f} GB/s"
              f" ({coopjit.compile_reduce(a, 1).config['threads'] if hasattr(coopjit, 'compile_reduce') else '?'} thr)", flush=True)
    print("## skinny rows", flush=True)
    for dt, (m, k, n), V in [
            (f32, (64, 4096, 4000), [{}, {"threads": 12}, {"threads": 8}, {"pack": 1, "inline_b": 1, "split": "dp"}, {"pack": 1, "inline_b": 1, "split": "dp", "threads": 12}]),
            (f32, (32, 8192, 2048), [{}, {"threads": 12}, {"threads": 8}, {"order": "k_outer"}, {"threads": 12, "kt": 64}]),
            (f64, (64, 4096, 2048), [{}, {"threads": 12}, {"threads": 8}, {"order": "k_outer"}, {"pack": 1, "inline_b": 1, "split": "dp"}])]:
        k, n = k // S, n // S
        a = rng.standard_normal((m, k)).astype(dt); b = rng.standard_normal((k, n)).astype(dt)
        section(f"{np.dtype(dt).name} {m}x{k}x{n}", a, b, V, 3, work=None, ref="numpy", np_too=True)

if PART in ("all", "square"):
    print("## f32 squares, 16 threads", flush=True)
    n = 4096 // S
    a = rng.standard_normal((n, n)).astype(f32); b = rng.standard_normal((n, n)).astype(f32)
    V = [{}, {"nc_tiles": 2}, {"nc_tiles": 4}, {"kt": 2048}, {"nc_tiles": 2, "kt": 2048}, {"kt": 512}, {"nc_tiles": 0}, {"grid_m": 4}, {"shares": 2}]
    section("f32 4096^3 16thr", a, b, V, 3, blocks=3, seconds=1.0, ref="torch")
    one = timed(lambda: coopjit.matmul(a[:1024], b, plan={"threads": 1}), 3, 0.5, time.thread_time)
    print(f"  one thread 1024x4096x4096 (CPU time) {2*1024*n*n/one/1e9:.1f} GF/s ({2*1024*n*n/one/1e9/P1*100:.1f}% of {P1:.0f})", flush=True)
    n = 8192 // S
    a = rng.standard_normal((n, n)).astype(f32); b = rng.standard_normal((n, n)).astype(f32)
    V = [{}, {"nc_tiles": 2}, {"nc_tiles": 4}, {"kt": 2048}, {"nc_tiles": 2, "kt": 2048}]
    section("f32 8192^3 16thr", a, b, V, 3, blocks=1, seconds=0.1, ref="torch")

if PART == "confirm":
    print("## GEMV (A @ x, A C-contiguous): bytes of A a second; % of the 16-thread copy bandwidth. None: the default "
          "(plan=None); {}: the same plan through plan= (the path the other variants take); {'threads': 12}: the "
          "session 15 default", flush=True)
    for (m, k) in [(4096 // S, 4096 // S), (16384 // S, 4096 // S), (2048 // S, 2048 // S)]:
        a = rng.standard_normal((m, k)).astype(f32); x = rng.standard_normal((k, 1)).astype(f32)
        section(f"gemv {m}x{k}x1", a, x, [None, {}, {"threads": 12}], 5, work=a.nbytes, unit="GB/s", ref="numpy", np_too=True)
    print("## skinny rows (None: the default; f64 {'inline_b': 0}: the session 15 default)", flush=True)
    for dt, (m, k, n), V in [(f64, (64, 4096, 2048), [None, {}, {"inline_b": 0}]),
                             (f32, (64, 4096, 4000), [None]), (f32, (32, 8192, 2048), [None]), (f32, (64, 4096, 4096), [None])]:
        k, n = k // S, n // S
        a = rng.standard_normal((m, k)).astype(dt); b = rng.standard_normal((k, n)).astype(dt)
        section(f"{np.dtype(dt).name} {m}x{k}x{n}", a, b, V, 5, ref="numpy", np_too=True)
