"""The 16-core host's mid-size rows that trailed NumPy / torch in session 17's bench --quick (issue 14):
f32 513x129x700, f64 1024^3 and 4096^3, and small f32 products from Python. For each: coopjit's
automatic plan (its config), plan variants through `plan=` (compiled first, then called through
their kernels' own `run` into a new array each call, so that no call pays plan='s Python), NumPy and torch, all in
alternating rounds with a pause before each block (benchmarks/_rounds.py), medians.

Run: python benchmarks/mid_rows_16core.py [small] [rows] [confirm] [CASE ...] (CASE: a substring of
"f32 513x129x700"; `confirm`: the session-18 mid-size rule's plans against the packed ones; not run
on the 16-core host yet).
`small` also prints what one call's parts cost (the fast path, the kernel, NumPy's dtype
comparisons that matmul_fast made before session 18)."""
import os
import sys

import numpy as np

import coopjit
from _rounds import alternate, err_of, timed

try:
    import torch
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "16")))
except ImportError:
    torch = None

FIELDS = ("order", "mr", "nr", "kt", "mc_tiles", "nc_tiles", "grid_m", "threads", "shares", "split", "pack", "inline_b")


def desc(cfg):
    return " ".join(f"{f}={cfg[f]}" for f in FIELDS if f in cfg)


def trace(f, reps=5):
    """The pool's launch trace of back-to-back calls (medians): the launch, the workers' busy time."""
    core = coopjit._core
    core._set_launch_trace(True)
    rows = []
    for _ in range(reps):
        f()
        f()
        tr = core._launch_trace()
        d = np.array(tr["end_ns"], float) - np.array(tr["start_ns"], float)
        rows.append((tr["join_ns"], float(np.median(d)), d.max(), tr["workers"]))
    core._set_launch_trace(False)
    r = np.median(np.array(rows, float), axis=0)
    return f"launch {r[0] / 1e3:.1f} us ({int(r[3])} workers): busy median {r[1] / 1e3:.1f} max {r[2] / 1e3:.1f} us"


def row(dtype, m, n, k, variants, rounds=3, seconds=0.2, pause=0.2):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    name = f"{np.dtype(dtype).name} {m}x{n}x{k}"
    cases = [("auto", lambda: coopjit.matmul(a, b))]
    auto = coopjit.compile_gemm(m, n, k, dtype)
    print(f"{name} auto: [{desc(auto.config)}]", flush=True)
    for v in variants:
        try:
            kern = coopjit.compile_gemm(m, n, k, dtype, plan=v)
        except (ValueError, TypeError) as e:
            print(f"  {name} {v}: refused ({e})", flush=True)
            continue
        print(f"  {name} {v}: [{desc(kern.config)}]", flush=True)

        def call(run=kern._core.run):
            c = np.empty((m, n), dtype)  # a new result each call, as matmul's
            run(a, b, c, 1.0, 0.0)
            return c
        cases.append((str(v), call))
    cases.append(("numpy", lambda: np.matmul(a, b)))
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        cases.append(("torch", lambda: torch.matmul(ta, tb)))
    errs = {nm: err_of(f(), ref) for nm, f in cases}
    for nm, f in cases[: -2 if torch is not None else -1]:
        if m * n * k < 1e10 or nm == "auto":
            print(f"  {name} {nm} trace: {trace(f)}", flush=True)
    times = alternate(cases, rounds=rounds, pause=pause, seconds=seconds)
    t0 = float(np.median(times["auto"]))
    tn = float(np.median(times["numpy"]))
    tt = float(np.median(times["torch"])) if "torch" in times else float("nan")
    flops = 2.0 * m * n * k
    for nm, _ in cases:
        t = float(np.median(times[nm]))
        print(f"{name:<18} {nm:<44} {t * 1e6:10.1f} us {flops / t / 1e9:7.0f} G/s  auto/this {t0 / t:5.2f}  "
              f"numpy/this {tn / t:5.2f}  torch/this {tt / t:5.2f}  rounds {' '.join(f'{x * 1e6:.0f}' for x in times[nm])}"
              f"  err {errs[nm]:.1e}", flush=True)


ROWS = [
    ("float32", 513, 129, 700, [
        {"pack": 0}, {"pack": 0, "threads": 8}, {"pack": 0, "mr": 12, "nr": 32}, {"mr": 7}, {"mr": 6},
        {"mr": 12, "nr": 32}, {"threads": 13}, {"kt": 352}, {"nc_tiles": 1}, {"mc_tiles": 2}, {"shares": 2}]),
    ("float64", 1024, 1024, 1024, [
        {"shares": 1}, {"shares": 8}, {"kt": 512}, {"kt": 256}, {"mr": 6, "nr": 32}, {"mr": 8, "nr": 24},
        {"mr": 12, "nr": 16}, {"grid_m": 4}, {"grid_m": 16}, {"nc_tiles": 1}, {"mc_tiles": 16}, {"threads": 8}]),
    ("float64", 4096, 4096, 4096, [{"mr": 8, "nr": 24}, {"kt": 512}]),
]

# The mid-size rule (session 18: on 8+ AVX-512 cores, f32 / f64 products whose packed nest gives
# its busiest worker 10% more tiles than the tile walk's stay unpacked): its plans against the
# packed ones they replace, and two products it leaves packed against their unpacked plans.
CONFIRM = [
    ("float32", 513, 129, 700, [{"pack": 1}, {"pack": 0, "mr": 12, "nr": 32}]),
    ("float32", 512, 129, 700, [{"pack": 1}]),
    ("float64", 257, 129, 1000, [{"pack": 1}]),
    ("float32", 512, 512, 512, [{"pack": 0}]),
    ("float32", 1000, 130, 1000, [{"pack": 0}]),
]


def small():
    """One call's parts, f32 4^3 / 16^3 / 32^3: alternating rounds, medians."""
    print(f"pool {coopjit.get_num_threads()} workers", flush=True)
    try:
        import ml_dtypes
        f, bf = np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)
        e4, e5 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
        t_eq = timed(lambda: (f == bf, f == e4, f == e5), blocks=5, seconds=0.2)
        t_noop = timed(lambda: (f is f, f is f, f is f), blocks=5, seconds=0.2)
        print(f"float32 dtype == ml_dtypes' 3 types (what matmul_fast did before session 18): {(t_eq - t_noop) * 1e6:.3f} us",
              flush=True)
    except ImportError:
        print("ml_dtypes not installed", flush=True)
    for dtype, n in (("float32", 4), ("float32", 16), ("float32", 32)):
        rng = np.random.default_rng(n)
        a, b = rng.standard_normal((n, n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype)
        c = np.empty((n, n), dtype)
        kern = coopjit.compile_gemm(n, n, n, dtype)
        fast = coopjit._core.matmul_fast
        cases = [("coopjit.matmul", lambda: coopjit.matmul(a, b)), ("_core.matmul_fast(a, b)", lambda: fast(a, b, None)),
                 ("_core.matmul_fast(a, b, out)", lambda: fast(a, b, c)), ("kernel._core.run", lambda: kern._core.run(a, b, c, 1.0, 0.0)),
                 ("np.matmul", lambda: np.matmul(a, b)), ("np.matmul(out=)", lambda: np.matmul(a, b, out=c))]
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            cases.append(("torch.matmul", lambda: torch.matmul(ta, tb)))
        times = alternate(cases, rounds=5, pause=0.05, seconds=0.06, blocks=3)
        print(f"{dtype} {n}^3 [{desc(kern.config)}]", flush=True)
        for nm, _ in cases:
            ts = times[nm]
            print(f"  {dtype} {n:>2}^3 {nm:<30} {np.median(ts) * 1e6:7.3f} us  rounds {' '.join(f'{x * 1e6:.2f}' for x in ts)}",
                  flush=True)


def main():
    args = sys.argv[1:]
    names = ("small", "rows", "confirm")
    sections = [s for s in args if s in names] or ["small", "rows"]
    only = [s for s in args if s not in names]
    print(f"coopjit {coopjit.__version__}, {coopjit.get_num_threads()} workers, {coopjit.cpu_info()['name']}, numpy "
          f"{np.__version__}, torch {torch.__version__ if torch else '-'}", flush=True)
    if "small" in sections:
        small()
    if "rows" in sections:
        for dtype, m, n, k, variants in ROWS:
            if only and not any(o in f"{'f32' if dtype == 'float32' else 'f64'} {m}x{n}x{k}" for o in only):
                continue
            big = m * n * k > 1e10
            row(dtype, m, n, k, variants, rounds=3, seconds=0.6 if big else 0.2, pause=0.2)
    if "confirm" in sections:
        for dtype, m, n, k, variants in CONFIRM:
            row(dtype, m, n, k, variants, rounds=3, seconds=0.15, pause=0.15)


if __name__ == "__main__":
    main()
