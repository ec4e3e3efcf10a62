"""Sums of many short contiguous rows (K rows of n elements, axis 1) against NumPy: GB/s of the
input read. Each library runs in its own block of calls with a pause before it; best of 30.

    python benchmarks/bench_short_rows.py [--dtype float32] [--lengths 3,8,40,128] [--mb 48]

The default lengths cover the column form of short rows (3-12), rows of whole vectors (16-64),
rows with masked ends (40, 100) and the 4 x 2-vector row tiles (128-2048).
"""
import argparse
import time

import numpy as np

import coopjit


def best(f, n=30):
    f()
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--lengths", default="3,6,8,12,16,32,40,48,64,100,128,256,512,1024,2048")
    ap.add_argument("--mb", type=float, default=48, help="megabytes of each input (default 48)")
    args = ap.parse_args()
    item = np.dtype(args.dtype).itemsize
    print(f"coopjit {coopjit.__version__}, {coopjit.get_num_threads()} threads, NumPy {np.__version__}; "
          f"copy peak (read + written) {coopjit.peak()['copy']['all']:.1f} GB/s")
    print(f"{'rows x n':>14} {'coopjit GB/s':>13} {'numpy GB/s':>11} {'vs numpy':>9}")
    for n in (int(v) for v in args.lengths.split(",")):
        K = int(args.mb * 1e6) // (n * item)
        a = np.random.default_rng(0).random((K, n)).astype(args.dtype)
        assert np.allclose(coopjit.reduce(a, 1), a.astype(np.float64).sum(axis=1), rtol=1e-4)
        time.sleep(0.5)
        tc = best(lambda: coopjit.reduce(a, 1))
        time.sleep(0.5)
        tn = best(lambda: a.sum(axis=1))
        print(f"{K:>9} x {n:<3} {a.nbytes / tc / 1e9:13.1f} {a.nbytes / tn / 1e9:11.1f} {tn / tc:9.2f}")


if __name__ == "__main__":
    main()
