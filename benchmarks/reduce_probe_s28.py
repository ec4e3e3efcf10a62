"""Reductions on one thread, CPU time (time.thread_time: immune to other processes' use of the
cores, not to their memory traffic), against NumPy and torch (one thread each) and the one-thread
copy rate (NumPy's copy of as many bytes, CPU time; bytes read + written) measured in each round;
plan-override variants of coopjit alternate block by block. Medians of --rounds blocks. Session 28.

    python3 benchmarks/reduce_probe_s28.py [--rounds 9] [--threads 1]
        [--cases 3x4000000:0,3x2000x2000:0.1:float32:max,...] [--plans '{};{"column.split":0}'] [--libs coopjit,numpy,torch]
A case is SHAPE[:AXES[:DTYPE[:OP]]]: SHAPE as AxBxC, AXES as 0 / 0.1 / None (default None), DTYPE
float32 / float64 / bfloat16, OP sum / max. With --threads 2 the time is wall time (perf_counter) and the copy rate
_core.measure_peak('copy')'s (all threads, wall time).
"""
import argparse
import json
import os
import statistics
import time

import ml_dtypes
import numpy as np

import coopjit
from coopjit import _core


def parse(c):
    parts = c.split(":")
    shape = tuple(int(v) for v in parts[0].split("x"))
    ax = parts[1] if len(parts) > 1 else "None"
    axis = None if ax == "None" else tuple(int(v) for v in ax.split(".")) if "." in ax else int(ax)
    dt = parts[2] if len(parts) > 2 else "float32"
    op = parts[3] if len(parts) > 3 else "sum"
    return shape, axis, dt, op


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cases", default="3x4000000:0,3x2000x2000:0.1,1000000x64:0")
    ap.add_argument("--plans", default="{}")
    ap.add_argument("--libs", default="coopjit,numpy,torch")
    ap.add_argument("--rotate", action="store_true", help="rotate the blocks' order each round (session 29)")
    args = ap.parse_args()
    libs = args.libs.split(",")
    coopjit.set_num_threads(args.threads)
    torch = None
    if "torch" in libs:
        import torch
        torch.set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    plans = [json.loads(p) for p in args.plans.split(";")] if "coopjit" in libs else []
    cols = [f"coopjit{json.dumps(p) if p else ''}" for p in plans] + [lib for lib in libs if lib != "coopjit"]
    print(f"# {args.threads} thread(s), {'CPU' if args.threads == 1 else 'wall'} time, medians of {args.rounds} "
          f"blocks; GB/s of the input read (%: of the copy rate of the same round); columns: {' | '.join(cols)}")
    rng = np.random.default_rng(28)
    for c in args.cases.split(","):
        shape, axis, dtname, op = parse(c)
        dt = np.dtype(ml_dtypes.bfloat16) if dtname == "bfloat16" else np.dtype(dtname)
        a = rng.random(shape, dtype=np.float32).astype(dt)
        fns = []
        for p in plans:
            fns.append((p, lambda: coopjit.reduce(a, axis=axis, op=op)))
        for lib in libs:
            if lib == "numpy" and dtname != "bfloat16":
                fns.append((None, (lambda: np.sum(a, axis=axis)) if op == "sum" else (lambda: np.max(a, axis=axis))))
            elif lib == "numpy":
                fns.append((None, None))
            elif lib == "torch":
                ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if dtname == "bfloat16" else \
                    torch.from_numpy(a)
                if axis is None:
                    fns.append((None, (lambda: ta.sum()) if op == "sum" else (lambda: ta.max())))
                else:
                    fns.append((None, (lambda: ta.sum(dim=axis)) if op == "sum" else (lambda: ta.amax(dim=axis))))
        ref = np.sum(a.astype(np.float64), axis=axis) if op == "sum" else np.max(a, axis=axis).astype(np.float64)
        for p, f in fns:
            if p is not None:
                _core.reduce_plan_overrides(p)
                got = np.asarray(f(), np.float64)
                assert np.allclose(got, ref, rtol=1e-2 if dtname == "bfloat16" else 1e-4), (c, p)
            elif f is not None:
                f()
        _core.reduce_plan_overrides({})
        src = np.ones(a.nbytes, np.uint8)
        dst = np.ones(a.nbytes, np.uint8)
        calls = min(50, max(1, int(0.03 / (a.nbytes / 40e9))))
        times = [[] for _ in fns]
        copies = []
        for rnd in range(args.rounds):
            if args.threads == 1:  # NumPy's copy of as many bytes on this thread, CPU time: bytes read + written
                t = clock()
                np.copyto(dst, src)
                copies.append(2 * src.nbytes / (clock() - t) / 1e9)
            else:
                copies.append(_core.measure_peak("copy", 0.03)["all"])
            for k in range(len(fns)):
                i = (k + rnd) % len(fns) if args.rotate else k
                p, f = fns[i]
                if f is None:
                    continue
                if p is not None:
                    _core.reduce_plan_overrides(p)
                t = clock()
                for _ in range(calls):
                    f()
                times[i].append((clock() - t) / calls)
            _core.reduce_plan_overrides({})
        copy = statistics.median(copies)
        cells = []
        for tt in times:
            if not tt:
                cells.append(f"{'n/a':>13}")
                continue
            rate = a.nbytes / statistics.median(tt) / 1e9
            cells.append(f"{rate:7.1f} {100 * rate / copy:4.0f}%")
        print(f"{c:>28} copy {copy:5.1f} | " + " ".join(cells) + f" | load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
