"""Reductions along the rows of K contiguous rows of n elements (axis 1) against NumPy and the
copy bandwidth: GB/s of the input read. Each library runs in its own block of calls with a pause
before it; best of 30. One thread (--threads 1) is timed in CPU time (time.thread_time), so that
other work on the machine costs little; more threads in wall time.

    python benchmarks/bench_short_rows.py [--dtype float32] [--op sum] [--threads 1]
                                          [--lengths 3,8,40,128] [--mb 48]

The copy column is NumPy's copy of the input's bytes (np.copyto into a second array), counted as
bytes read plus bytes written, as coopjit.peak() counts its copy peak; "% copy" is coopjit's read
rate against it. The default lengths cover the segment tiles of short rows (3-31), rows of whole
vectors (16-64), rows with masked ends (40, 100, 200) and the 4 x 2-vector row tiles (128-4096).
"""
import argparse
import time

import numpy as np

import coopjit


def best(f, clock, n=30):
    f()
    f()
    ts = []
    for _ in range(n):
        t = clock()
        f()
        ts.append(clock() - t)
    return min(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--op", default="sum", choices=["sum", "prod", "min", "max"])
    ap.add_argument("--threads", type=int, default=0, help="coopjit's workers (default: the machine's)")
    ap.add_argument("--lengths", default="3,5,6,8,12,15,17,24,31,32,40,48,64,100,128,200,256,512,1024,2048,4096")
    ap.add_argument("--mb", type=float, default=48, help="megabytes of each input (default 48)")
    args = ap.parse_args()
    if args.threads:
        coopjit.set_num_threads(args.threads)
    threads = coopjit.get_num_threads()
    clock = time.thread_time if threads == 1 else time.perf_counter
    if args.dtype == "bfloat16":
        import ml_dtypes
        dtype = np.dtype(ml_dtypes.bfloat16)
    else:
        dtype = np.dtype(args.dtype)
    item = dtype.itemsize
    src = np.random.default_rng(0).integers(1, 4, int(args.mb * 1e6) // item).astype(dtype)
    dst = np.empty_like(src)
    time.sleep(0.5)
    tcopy = best(lambda: np.copyto(dst, src), time.perf_counter if threads > 1 else clock)
    copy = 2 * src.nbytes / tcopy / 1e9
    print(f"coopjit {coopjit.__version__}, {threads} threads ({'CPU' if threads == 1 else 'wall'} time), "
          f"NumPy {np.__version__}; {args.op} of {dtype}; NumPy copy (read + written, one thread) {copy:.1f} GB/s")
    print(f"{'rows x n':>14} {'coopjit GB/s':>13} {'numpy GB/s':>11} {'vs numpy':>9} {'% copy':>7}")
    ref = getattr(np, args.op)
    for n in (int(v) for v in args.lengths.split(",")):
        K = src.size // n
        a = src[:K * n].reshape(K, n)
        got = np.asarray(coopjit.reduce(a, 1, args.op), np.float64)
        want = ref(a.astype(np.float64), axis=1)
        assert np.allclose(got, want, rtol=1e-2 if item <= 2 else 1e-5), n
        time.sleep(0.5)
        tc = best(lambda: coopjit.reduce(a, 1, args.op), clock)
        time.sleep(0.5)
        tn = best(lambda: ref(a, axis=1), time.thread_time)
        print(f"{K:>9} x {n:<4} {a.nbytes / tc / 1e9:12.1f} {a.nbytes / tn / 1e9:11.1f} {tn / tc:9.2f} "
              f"{100 * a.nbytes / tc / 1e9 / copy:6.0f}%")


if __name__ == "__main__":
    main()
