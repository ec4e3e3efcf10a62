"""Sums of many short contiguous rows (K rows of n elements, axis 1) against NumPy: GB/s of the
input read. Each library runs in its own block of calls with a pause before it; best of 30.

    python benchmarks/bench_short_rows.py [--dtype float32]
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
    args = ap.parse_args()
    print(f"coopjit {coopjit.__version__}, {coopjit.get_num_threads()} threads, NumPy {np.__version__}; "
          f"copy peak (read + written) {coopjit.peak()['copy']['all']:.1f} GB/s")
    print(f"{'rows x n':>14} {'coopjit GB/s':>13} {'numpy GB/s':>11} {'vs numpy':>9}")
    for K, n in [(4_000_000, 3), (2_000_000, 6), (1_000_000, 8), (1_000_000, 12), (1_000_000, 16), (600_000, 32)]:
        a = np.random.default_rng(0).random((K, n)).astype(args.dtype)
        assert np.allclose(coopjit.reduce(a, 1), a.astype(np.float64).sum(axis=1), rtol=1e-4)
        time.sleep(0.5)
        tc = best(lambda: coopjit.reduce(a, 1))
        time.sleep(0.5)
        tn = best(lambda: a.sum(axis=1))
        print(f"{K:>9} x {n:<3} {a.nbytes / tc / 1e9:13.1f} {a.nbytes / tn / 1e9:11.1f} {tn / tc:9.2f}")


if __name__ == "__main__":
    main()
