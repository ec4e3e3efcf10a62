"""python -m coopjit tune: tunes a list of GEMM problems from the command line and prints each report."""
from __future__ import annotations

import argparse

import numpy as np


def _dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:  # bfloat16, float8: ml_dtypes
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def _shape(text: str) -> tuple[int, int, int]:
    """MxNxK -> (M, N, K), for argparse (an ArgumentTypeError is printed as a usage error)."""
    parts = text.lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 0:
        raise argparse.ArgumentTypeError(f"a GEMM shape is MxNxK with three non-negative integers (for example "
                                         f"1024x1024x1024), got {text!r}")
    return dims


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m coopjit tune",
                                     description="Tunes GEMM problems; the winners are stored in the tuning "
                                                 "database and used by later calls.")
    parser.add_argument("--shape", action="append", required=True, metavar="MxNxK", type=_shape,
                        help="a problem (repeat for several)")
    parser.add_argument("--dtype", default="float32",
                        choices=["float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8",
                                 "uint8"], help="the inputs' type (default float32)")
    parser.add_argument("--trans-a", action="store_true", help="A given as K x M")
    parser.add_argument("--trans-b", action="store_true", help="B given as N x K")
    parser.add_argument("--accumulate", action="store_true", help="tune the beta != 0 kernel")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per problem (default 60)")
    parser.add_argument("--max-candidates", type=int, default=None, help="plans to time at most per problem")
    parser.add_argument("--no-save", action="store_true", help="do not store the winners")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--plot", metavar="PREFIX", help="save a plot per problem as PREFIX-MxNxK.png")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="a dask.distributed scheduler (tcp://host:8786): the problems are tuned on its workers, "
                             "one timing per machine at a time, and the winners merged into every worker's database "
                             "and this machine's")
    parser.add_argument("--threads", type=int, default=None,
                        help="with --scheduler: coopjit's pool during the timings (default: the machine's CPUs)")
    args = parser.parse_args(argv)
    if args.threads is not None and not args.scheduler:
        parser.error("--threads needs --scheduler")

    import coopjit

    shapes = ["x".join(map(str, dims)) for dims in args.shape]  # MxNxK, checked by _shape
    # The arguments tune() refuses are usage errors here, not tracebacks (--budget 0, --budget nan,
    # --max-candidates 0, a shape with an empty dimension).
    from coopjit._tune import _check_memory, _parse_shape, check_limits

    try:
        check_limits(args.budget, args.max_candidates)
        for shape in shapes:
            m, n, k = _parse_shape(shape)
            if not args.scheduler:  # (a cluster's workers have their own memory)
                _check_memory(m, n, k, _dtype(args.dtype), drawn=True)
    except (ValueError, MemoryError) as e:
        parser.error(str(e))
    if args.threads is not None and not 1 <= args.threads <= coopjit._core.max_threads:
        parser.error(f"--threads must be in [1, {coopjit._core.max_threads}], got {args.threads}")
    if args.scheduler:
        from coopjit.dask import tune as tune_on_cluster

        reports = tune_on_cluster(shapes, args.scheduler, dtype=_dtype(args.dtype), trans_a=args.trans_a,
                                  trans_b=args.trans_b, accumulate=args.accumulate, budget=args.budget,
                                  max_candidates=args.max_candidates, progress=not args.no_progress,
                                  save=not args.no_save, threads=args.threads)
        cluster_reports = iter(reports)
    summary = []
    for shape in shapes:
        if args.scheduler:
            r = next(cluster_reports)
            print(f"{shape}: tuned on {r.worker} ({r.host}, {r.threads} threads)")
        else:
            r = coopjit.tune(shape=shape, dtype=_dtype(args.dtype), trans_a=args.trans_a, trans_b=args.trans_b,
                             accumulate=args.accumulate, budget=args.budget, max_candidates=args.max_candidates,
                             progress=not args.no_progress, save=not args.no_save)
        print(r, flush=True)
        print()
        if args.plot:
            r.plot(f"{args.plot}-{shape}.png")
        summary.append((shape, r))
    if len(summary) > 1:
        print(f"{'shape':>18} {'default ms':>11} {'tuned ms':>9} {'speed-up':>9}")
        for shape, r in summary:
            d = r.default.get("confirmed_s") if r.default else None
            w = r.winner.get("confirmed_s") if r.winner else None
            print(f"{shape:>18} {d * 1e3 if d else float('nan'):11.3f} {w * 1e3 if w else float('nan'):9.3f} "
                  f"{r.speedup or float('nan'):8.2f}x")
