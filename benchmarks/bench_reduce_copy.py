"""Reductions of large arrays against the copy bandwidth measured right before them (issue 14's
2-core target: every row at >= 90% of copy), with plan variants interleaved block by block.

The cases of `python -m coopjit bench`'s reduction sections (4096^2 and 8192^2 along every axis,
few long rows, many short rows, 1-D); GB/s of the input read. The copy column: NumPy's copy of
the input's bytes into a second array (np.copyto), bytes read + written (coopjit.peak()'s
convention); one thread timed in CPU time (time.thread_time) like the reductions, more threads
coopjit.peak()'s memcpy split between the threads in wall time. Each round times the copy, then
each plan variant (a block of calls each), so that every variant meets the same machine; the
best block of --rounds rounds is kept. On a shared machine, watch the load column.

    python benchmarks/bench_reduce_copy.py [--threads 1,2] [--rounds 7] [--cases all|NAME,...]
        [--plans '{};{"column_rows.block_cols": 8192}'] [--numpy]

A case is a name below or op:axis:RxC[:dtype], e.g. sum:0:2048x32768:float32.

--plans: ';'-separated JSON dicts of reduce plan overrides (coopjit._core.reduce_plan_overrides;
{} is the planner's choice).
"""
import argparse
import json
import os
import time

import numpy as np

import coopjit
from coopjit import _core

CASES = {
    "sum0_4k": ("sum", 0, (4096, 4096), "float32"),
    "sum1_4k": ("sum", 1, (4096, 4096), "float32"),
    "sumN_4k": ("sum", None, (4096, 4096), "float32"),
    "max0_4k": ("max", 0, (4096, 4096), "float32"),
    "max1_4k": ("max", 1, (4096, 4096), "float32"),
    "sum1_4k_f64": ("sum", 1, (4096, 4096), "float64"),
    "sum1_3x4e6": ("sum", 1, (3, 4_000_000), "float32"),
    "sumN_12e6": ("sum", None, (12_000_000,), "float32"),
    "sumN_8k": ("sum", None, (8192, 8192), "float32"),
    "sum0_8k": ("sum", 0, (8192, 8192), "float32"),
    "sum1_8k": ("sum", 1, (8192, 8192), "float32"),
    "sum1_4e6x3": ("sum", 1, (4_000_000, 3), "float32"),
}


def case(name):
    """A named case, or op:axis:RxC[:dtype] (axis None / 0 / 1), e.g. sum:0:2048x32768:float32."""
    if name in CASES:
        return CASES[name]
    op, axis, shape, *dt = name.split(":")
    return (op, None if axis == "None" else int(axis), tuple(int(v) for v in shape.split("x")),
            dt[0] if dt else "float32")


def block(f, clock, calls):
    t = clock()
    for _ in range(calls):
        f()
    return (clock() - t) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cases", default="all")
    ap.add_argument("--plans", default="{}")
    ap.add_argument("--numpy", action="store_true", help="also time NumPy (one thread, CPU time)")
    args = ap.parse_args()
    names = list(CASES) if args.cases == "all" else args.cases.split(",")
    plans = [json.loads(p) for p in args.plans.split(";")]
    rng = np.random.default_rng(7)
    print(f"coopjit {coopjit.__version__} from {os.path.dirname(coopjit.__file__)}; {coopjit.cpu_info()['name']}; "
          f"best of {args.rounds} rounds")
    labels = [json.dumps(p) if p else "planner" for p in plans] + (["numpy"] if args.numpy else [])
    print(f"{'case':>12} {'thr':>3} {'copy':>6} " + " ".join(f"{'GB/s':>6} {'%copy':>6}" for _ in labels) +
          f" {'load':>5}   columns: {', '.join(labels)}")
    for threads in (int(v) for v in args.threads.split(",")):
        coopjit.set_num_threads(threads)
        clock = time.thread_time if threads == 1 else time.perf_counter
        for name in names:
            op, axis, shape, dtype = case(name)
            a = rng.random(shape, dtype=np.dtype(dtype))
            ref = np.sum(a, axis=axis, dtype=np.float64) if op == "sum" else np.max(a, axis=axis)
            fns = []
            for p in plans:
                _core.reduce_plan_overrides(p)
                got = coopjit.reduce(a, axis=axis, op=op)
                assert np.allclose(np.asarray(got, np.float64), ref, rtol=1e-4), (name, p)
                fns.append((p, lambda: coopjit.reduce(a, axis=axis, op=op), clock))
            if args.numpy:
                fns.append((None, (lambda: np.sum(a, axis=axis)) if op == "sum" else (lambda: np.max(a, axis=axis)),
                            time.thread_time))
            dst = np.empty_like(a)
            calls = min(20, max(1, int(0.04 / (a.nbytes / 25e9))))
            best_copy, best = float("inf"), [float("inf")] * len(fns)
            for _ in range(args.rounds):
                if threads == 1:
                    best_copy = min(best_copy, block(lambda: np.copyto(dst, a), clock, calls) / (2 * a.nbytes))
                else:
                    best_copy = min(best_copy, 1 / (1e9 * coopjit.peak(refresh=True, seconds=0.05)["copy"]["all"]))
                for i, (p, f, clk) in enumerate(fns):
                    if p is not None:
                        _core.reduce_plan_overrides(p)
                    time.sleep(0.05)
                    best[i] = min(best[i], block(f, clk, calls))
            _core.reduce_plan_overrides({})
            copy = 1 / best_copy / 1e9
            cells = " ".join(f"{a.nbytes / t / 1e9:6.1f} {100 * a.nbytes / t / 1e9 / copy:5.0f}%" for t in best)
            print(f"{name:>12} {threads:>3} {copy:6.1f} {cells} {os.getloadavg()[0]:5.1f}", flush=True)
            del a, dst


if __name__ == "__main__":
    main()
