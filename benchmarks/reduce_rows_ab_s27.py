"""A/B of row-form plan variants of float sums in one process, one thread's CPU time
(time.thread_time: immune to other processes' use of the 2 cores, not to their memory
traffic); variants alternate block by block; medians of --rounds blocks. Session 27.

    python3 benchmarks/reduce_rows_ab_s27.py [--rounds 15] [--cases 1000x1000,4096x4096:1,...]
        [--plans '{};{"row.sum_block":0}']
A case is RxC[:axis][:dtype] (axis 1 by default; None for all), e.g. 12000000:None.
"""
import argparse
import json
import statistics
import time

import ml_dtypes
import numpy as np

import coopjit
from coopjit import _core


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cases", default="1000x1000,4096x4096,8192x8192,64x1000000,12000000:None,256x16384")
    ap.add_argument("--plans", default='{};{"row.sum_block":0}')
    args = ap.parse_args()
    coopjit.set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    plans = [json.loads(p) for p in args.plans.split(";")]
    print(f"{args.threads} thread(s), {'CPU' if args.threads == 1 else 'wall'} time, medians of {args.rounds} blocks; "
          f"GB/s of the input read; columns: {' | '.join(json.dumps(p) for p in plans)}")
    rng = np.random.default_rng(5)
    for c in args.cases.split(","):
        parts = c.split(":")
        shape = tuple(int(v) for v in parts[0].split("x"))
        axis = None if len(parts) > 1 and parts[1] == "None" else int(parts[1]) if len(parts) > 1 else 1
        dt = np.dtype(ml_dtypes.bfloat16) if len(parts) > 2 and parts[2] == "bfloat16" else \
            np.dtype(parts[2] if len(parts) > 2 else "float32")
        a = rng.random(shape, dtype=np.float32).astype(dt)
        calls = max(1, int(0.03 / (a.nbytes / 40e9)))
        times = [[] for _ in plans]
        for p in plans:
            _core.reduce_plan_overrides(p)
            coopjit.reduce(a, axis=axis)
        for _ in range(args.rounds):
            for i, p in enumerate(plans):
                _core.reduce_plan_overrides(p)
                t = clock()
                for _ in range(calls):
                    coopjit.reduce(a, axis=axis)
                times[i].append((clock() - t) / calls)
        _core.reduce_plan_overrides({})
        med = [statistics.median(t) for t in times]
        print(f"{c:>24} " + " ".join(f"{a.nbytes / m / 1e9:7.1f}" for m in med) +
              "   ratio to first: " + " ".join(f"{m / med[0]:.3f}" for m in med[1:]), flush=True)


if __name__ == "__main__":
    main()
