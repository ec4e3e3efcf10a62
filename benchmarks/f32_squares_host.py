"""f32 GEMM squares on a many-core host (issue 14, session 22): coopjit's automatic plan and plan=
variants against torch and NumPy at the same thread count, each case in its own block of calls
after a pause, cases alternating over rounds, medians of the rounds; the plan each row ran (workers,
grid, blocking, packing, column blocks), the pool's per-share times for the 16-thread 4096^3 call,
and the bench's own method (C allocated per call) against a preallocated C (out=) to size the cost
of C's first-touch page faults. NumPy's thread count is set through threadpoolctl where it is
installed, else NumPy runs only in the rows at the host's full thread count.

    python benchmarks/f32_squares_host.py [ROUNDS]

Recorded: benchmarks/recorded/issue14-emr16-f32-squares-session22.txt."""
import os
import sys
import time

import numpy as np

import coopjit
from coopjit import _core

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
CORES = len(os.sched_getaffinity(0))
pk = coopjit.peak()
P1, PALL = pk["f32_fma"]["single"], pk["f32_fma"]["all"]
print(f"cpu {coopjit.cpu_info().get('name')}, {CORES} CPUs; coopjit.peak() f32 FMA 1 thread {P1:.0f} / "
      f"{pk['f32_fma']['threads']} threads {PALL:.0f} GFLOP/s", flush=True)
import torch  # noqa: E402

try:
    from threadpoolctl import threadpool_limits
except ImportError:
    threadpool_limits = None
rng = np.random.default_rng(0)
KEYS = ("threads", "shares", "grid_m", "mr", "nr", "kt", "mc_tiles", "nc_tiles", "pack", "inline_b", "own_a",
        "b_prefetch", "split", "order")


def plan_text(n, plan):
    c = coopjit.compile_gemm(n, n, n, np.float32, plan=plan).config
    return " ".join(f"{k}={c[k]}" for k in KEYS if k in c)


def err(c, ref):
    return float(np.abs(np.asarray(c[:64], np.float64) - ref).max() / np.abs(ref).max())


def block(f, seconds=0.25):
    """Mean seconds a call over a block of back-to-back calls (one warm-up call first)."""
    f()
    t = time.perf_counter()
    f()
    one = time.perf_counter() - t
    inner = max(1, int(seconds / max(one, 1e-7)))
    t = time.perf_counter()
    for _ in range(inner):
        f()
    return (time.perf_counter() - t) / inner


def section(n, threads, variants, rounds, numpy_ok):
    coopjit.set_num_threads(threads)
    torch.set_num_threads(threads)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    ref = a[:64].astype(np.float64) @ b.astype(np.float64)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    out = np.empty((n, n), np.float32)
    cases = {}
    for name, plan in variants:
        cases[name] = (lambda p=plan: coopjit.matmul(a, b, plan=p)) if plan is not None else (lambda: coopjit.matmul(a, b))
        print(f"  {n}^3 {threads}t {name:24} err {err(cases[name](), ref):.1e}  [{plan_text(n, plan)}]", flush=True)
    if ("auto", None) in variants:
        cases["auto out="] = lambda: coopjit.matmul(a, b, out=out)
    cases["torch"] = lambda: torch.matmul(ta, tb)
    print(f"  {n}^3 {threads}t torch err {err(cases['torch']().numpy(), ref):.1e}", flush=True)
    if numpy_ok:
        cases["numpy"] = lambda: np.matmul(a, b)
    res = {k: [] for k in cases}
    for _ in range(rounds):
        for k, f in cases.items():
            time.sleep(0.3)
            if k == "numpy" and threadpool_limits is not None:
                with threadpool_limits(threads):
                    res[k].append(block(f))
            else:
                res[k].append(block(f))
    peak = P1 * threads if threads < CORES else PALL
    base = float(np.median(res[variants[0][0]]))
    for k, ts in res.items():
        t = float(np.median(ts))
        g = 2.0 * n**3 / t / 1e9
        print(f"f32 {n:5}^3 {threads:2}t {k:24} {t * 1e3:9.3f} ms {g:8.1f} GF/s {100 * g / peak:5.1f}% peak  "
              f"{base / t:5.2f}x {variants[0][0]}  torch/this {float(np.median(res['torch'])) / t:5.2f}  "
              f"(rounds {' '.join(f'{x * 1e3:.2f}' for x in ts)})", flush=True)


def trace(n, plan, calls=5):
    """The compute launch's per-share times (ms: median / max / min share, last launch's end)."""
    coopjit.set_num_threads(CORES)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    _core._set_launch_trace(True)
    rows = []
    for _ in range(calls):
        time.sleep(0.2)
        t0 = time.perf_counter_ns()
        coopjit.matmul(a, b, plan=plan)
        t1 = time.perf_counter_ns()
        tr = _core._launch_trace()
        d = np.array(tr["end_ns"]) - np.array(tr["start_ns"])
        rows.append((t1 - t0, np.median(d), d.max(), d.min(), len(d)))
    _core._set_launch_trace(False)
    m = np.median(np.array(rows, float), axis=0)
    print(f"  trace {n}^3 {plan}: call {m[0] / 1e6:.2f} ms; shares ({m[4]:.0f}) med / max / min "
          f"{m[1] / 1e6:.2f} / {m[2] / 1e6:.2f} / {m[3] / 1e6:.2f} ms", flush=True)


NC = {"nc_tiles": 1}
which = os.environ.get("ONLY", "few,all")
if "few" in which:
    section(1024, 1, [("auto", None), ("nc_tiles=1", NC), ("mc_tiles=48", {"mc_tiles": 48})], ROUNDS, threadpool_limits)
    section(2048, 1, [("auto", None), ("nc_tiles=1", NC)], max(3, ROUNDS - 2), threadpool_limits)
    section(1024, 2, [("auto", None), ("nc_tiles=1", NC)], ROUNDS, threadpool_limits)
if "all" in which:
    section(1024, CORES, [("auto", None), ("shares=8", {"shares": 8})], ROUNDS, True)
    section(2048, CORES, [("auto", None), ("shares=8", {"shares": 8})], ROUNDS, True)
    section(4096, CORES, [("auto", None), ("shares=8", {"shares": 8}), ("kt=2048", {"kt": 2048})], ROUNDS, True)
    trace(4096, {})
    section(8192, CORES, [("auto", None), ("shares=8", {"shares": 8})], 3, True)
