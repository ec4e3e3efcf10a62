"""Times coopjit GEMM against numpy.matmul side by side in one run (medians, ratios).

    python benchmarks/bench_gemm.py [--sizes 64 128 ...] [--dtypes float32 float64] [--repeat N]

Square problems; each library gets a warm-up call, then the median of `repeat` timed calls
(fewer for large sizes so a run stays short). coopjit calls go through a compiled Kernel, the
way a user calls a hot kernel repeatedly; compile time is reported separately.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import coopjit


def median_seconds(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048])
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--json", help="also write the rows to this JSON file")
    args = p.parse_args()

    rng = np.random.default_rng(0)
    threads = os.environ.get("OMP_NUM_THREADS") or os.environ.get("OPENBLAS_NUM_THREADS") or "default"
    print(f"coopjit {coopjit.__version__} (LLVM {coopjit.llvm_version}), NumPy {np.__version__} "
          f"(BLAS threads: {threads}), CPU {coopjit.cpu_info()['name']}, {os.cpu_count()} cores")
    print("coopjit runs on one thread (threads come with the CPU speed issue).")
    head = (f"{'size':>6} {'dtype':>8} {'compile ms':>10} {'coopjit ms':>11} {'numpy ms':>9} "
            f"{'coopjit GF/s':>12} {'numpy GF/s':>10} {'numpy/coopjit':>13}")
    print(head)
    print("-" * len(head))
    rows = []
    for dtype in args.dtypes:
        for n in args.sizes:
            a = rng.standard_normal((n, n)).astype(dtype)
            b = rng.standard_normal((n, n)).astype(dtype)
            t0 = time.perf_counter()
            k = coopjit.compile_gemm(n, n, n, dtype)
            compile_ms = (time.perf_counter() - t0) * 1e3
            c = np.empty((n, n), dtype)
            repeat = max(3, args.repeat if n <= 512 else args.repeat // 3)
            t_cj = median_seconds(lambda: k(a, b, c), repeat)
            t_np = median_seconds(lambda: np.matmul(a, b), repeat)
            flops = 2.0 * n**3
            row = dict(size=n, dtype=dtype, compile_ms=compile_ms, coopjit_ms=t_cj * 1e3, numpy_ms=t_np * 1e3,
                       coopjit_gflops=flops / t_cj / 1e9, numpy_gflops=flops / t_np / 1e9, ratio=t_np / t_cj)
            rows.append(row)
            print(f"{n:>6} {dtype:>8} {compile_ms:10.1f} {t_cj * 1e3:11.3f} {t_np * 1e3:9.3f} "
                  f"{row['coopjit_gflops']:12.1f} {row['numpy_gflops']:10.1f} {row['ratio']:13.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
