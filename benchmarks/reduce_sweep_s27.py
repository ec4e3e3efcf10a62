"""Reductions of large arrays against the copy bandwidth measured next to them, with NumPy and
torch in their own blocks (issue 14's 2-core target: every row at >= 90% of the copy rate and at
or ahead of its peers). Session 27.

Each case (op, shape, axes, dtype) runs --rounds rounds; a round measures the copy rate
(_core.measure_peak('copy'): coopjit.peak()'s memcpy over every pool thread, bytes read + written),
then each library's block of calls after a pause (coopjit, NumPy, torch; wall time). GB/s of the
input read; medians over the rounds, %copy the median of each round's rate over that round's
copy rate. NumPy runs one thread (it has no other); torch the same threads as coopjit; NumPy has
no bfloat16 sum loop of its own (n/a).

    python3 benchmarks/reduce_sweep_s27.py [--threads 2] [--rounds 5] [--dtypes float32,bfloat16,float64]
        [--ops sum,max] [--only SUBSTRING] [--libs coopjit,numpy,torch]
"""
import argparse
import os
import statistics
import time

import ml_dtypes
import numpy as np

import coopjit
from coopjit import _core

SHAPES = [  # (shape, axes)
    ((3, 4_000_000), (None, 0, 1)),
    ((4_000_000, 3), (None, 0, 1)),
    ((8192, 8192), (None, 0, 1)),
    ((1_000_000, 64), (None, 0, 1)),
    ((64, 1_000_000), (None, 0, 1)),
    ((12_000_000,), (None,)),
    ((128, 64, 8192), ((0, 1), (1, 2))),
    ((1000, 1000, 64), ((0, 1), (1, 2))),
    ((3, 2000, 2000), ((0, 1), (1, 2))),
]


def block(f, calls):
    t = time.perf_counter()
    for _ in range(calls):
        f()
    return (time.perf_counter() - t) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dtypes", default="float32,bfloat16,float64")
    ap.add_argument("--ops", default="sum,max")
    ap.add_argument("--only", default="")
    ap.add_argument("--libs", default="coopjit,numpy,torch")
    ap.add_argument("--pause", type=float, default=0.05)
    args = ap.parse_args()
    libs = args.libs.split(",")
    coopjit.set_num_threads(args.threads)
    if "torch" in libs:
        import torch
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(27)
    print(f"coopjit {coopjit.__version__} from {os.path.dirname(coopjit.__file__)}; {coopjit.cpu_info()['name']}; "
          f"{args.threads} threads; medians of {args.rounds} rounds; GB/s of the input read")
    print(f"{'case':>40} {'copy':>6} " + " ".join(f"{lib:>8} {'%copy':>6}" for lib in libs) +
          " " + " ".join(f"{'x' + lib:>7}" for lib in libs[1:]) + f" {'load':>5}")
    for dtype in args.dtypes.split(","):
        dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
        for shape, axes in SHAPES:
            a = rng.random(shape, dtype=np.float32).astype(dt)
            for op in args.ops.split(","):
                for axis in axes:
                    name = f"{op} {dtype} {shape} ax {axis}"
                    if args.only and args.only not in name:
                        continue
                    fns = {}
                    for lib in libs:
                        if lib == "coopjit":
                            fns[lib] = lambda: coopjit.reduce(a, axis=axis, op=op)
                        elif lib == "numpy":
                            if dtype == "bfloat16":
                                continue
                            fns[lib] = (lambda: np.sum(a, axis=axis)) if op == "sum" else (lambda: np.max(a, axis=axis))
                        elif lib == "torch":
                            t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if dtype == "bfloat16" \
                                else torch.from_numpy(a)
                            if axis is None:
                                fns[lib] = (lambda t=t: t.sum()) if op == "sum" else (lambda t=t: t.max())
                            else:
                                fns[lib] = (lambda t=t: t.sum(dim=axis)) if op == "sum" else \
                                    (lambda t=t: t.amax(dim=axis))
                    ref = np.sum(a.astype(np.float64), axis=axis) if op == "sum" else np.max(a, axis=axis)
                    got = np.asarray(coopjit.reduce(a, axis=axis, op=op), np.float64)
                    rtol = 1e-2 if dtype == "bfloat16" else 1e-4
                    assert np.allclose(got, np.asarray(ref, np.float64), rtol=rtol), name
                    calls = min(20, max(1, int(0.04 / (a.nbytes / 40e9))))
                    copies, rates = [], {lib: [] for lib in fns}
                    for f in fns.values():
                        f()  # warm: the kernel compiled, pages touched
                    for _ in range(args.rounds):
                        copies.append(_core.measure_peak("copy", 0.05)["all"])
                        for lib, f in fns.items():
                            time.sleep(args.pause)
                            rates[lib].append(a.nbytes / block(f, calls) / 1e9)
                    copy = statistics.median(copies)
                    cells, ratios = [], []
                    for lib in libs:
                        if lib not in rates:
                            cells.append(f"{'n/a':>8} {'':>6}")
                            continue
                        pct = statistics.median(100 * r / c for r, c in zip(rates[lib], copies))
                        cells.append(f"{statistics.median(rates[lib]):8.1f} {pct:5.0f}%")
                    for lib in libs[1:]:
                        ratios.append(f"{statistics.median(rates['coopjit']) / statistics.median(rates[lib]):7.2f}"
                                      if lib in rates and "coopjit" in rates else f"{'n/a':>7}")
                    print(f"{name:>40} {copy:6.1f} {' '.join(cells)} {' '.join(ratios)} {os.getloadavg()[0]:5.1f}",
                          flush=True)
            del a


if __name__ == "__main__":
    main()
