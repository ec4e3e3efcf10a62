"""The rows of issue 14's 2-core list that session 12 worked on, for an A/B of two builds on a
shared machine: reductions along rows, one value from many, and the two GEMV shapes, against
torch (and NumPy for the GEMVs) at the same thread count.

Two measures, each the best of several blocks (other work on the machine only ever slows a
block down):
  cpu1  one thread, CPU time of the calling thread (time.thread_time: time spent descheduled does
        not count; memory traffic of other processes still does)
  wall2 two threads, wall time
Arrays start 16 bytes into a cache line, as NumPy's large arrays do here (--offset changes it).

  PYTHONPATH=<build A> python benchmarks/row_reduce_gemv_ab.py --lib coopjit
  PYTHONPATH=<build B> python benchmarks/row_reduce_gemv_ab.py --lib coopjit
  python benchmarks/row_reduce_gemv_ab.py --lib torch   (and --lib numpy)
Run each library in its own process: pools of several libraries in one process spin against
each other on 2 cores.
"""
import argparse
import time

import numpy as np


def _array(shape, dtype, offset, rng):
    n, item = int(np.prod(shape)), np.dtype(dtype).itemsize
    buf = np.empty(n * item + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    a = buf[start:start + n * item].view(dtype).reshape(shape)
    a[...] = rng.random(shape) if np.dtype(dtype).kind == "f" else rng.integers(0, 100, shape)
    return a


def _best(fn, wall, blocks):
    clock = time.perf_counter if wall else time.thread_time
    fn()
    t0 = clock()
    fn()
    inner = max(1, int(0.02 / max(clock() - t0, 1e-6)))
    best = float("inf")
    for _ in range(blocks):
        t0 = clock()
        for _ in range(inner):
            fn()
        best = min(best, (clock() - t0) / inner)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", choices=("coopjit", "torch", "numpy"), default="coopjit")
    p.add_argument("--offset", type=int, default=16, help="bytes into a cache line where the arrays start")
    p.add_argument("--blocks", type=int, default=7)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    a = _array((4096, 4096), np.float32, args.offset, rng)
    d = _array((4096, 4096), np.float64, args.offset, rng)
    x12 = _array((12_000_000,), np.float32, args.offset, rng)
    x8 = _array((1 << 23,), np.float32, args.offset, rng)
    big = _array((4096, 4096), np.float32, args.offset, rng) - 0.5
    v, w = big[:1].copy(), big[:, :1].copy()
    if args.lib == "coopjit":
        import coopjit as lib
        set_threads = lib.set_num_threads
        cases = [("sum axis=1 f32 4096^2", a.nbytes, lambda: lib.reduce(a, 1)),
                 ("max axis=1 f32 4096^2", a.nbytes, lambda: lib.reduce(a, 1, "max")),
                 ("sum axis=1 f64 4096^2", d.nbytes, lambda: lib.reduce(d, 1)),
                 ("sum axis=None f32 4096^2", a.nbytes, lambda: lib.reduce(a)),
                 ("sum f32 12e6", x12.nbytes, lambda: lib.reduce(x12)),
                 ("sum f32 8388608", x8.nbytes, lambda: lib.reduce(x8)),
                 ("gemv 1x4096x4096 f32", big.nbytes, lambda: lib.matmul(v, big)),
                 ("gemv 4096x1x4096 f32", big.nbytes, lambda: lib.matmul(big, w))]
    elif args.lib == "torch":
        import torch as lib
        set_threads = lib.set_num_threads
        ta, td, t12, t8, tb, tv, tw = (lib.from_numpy(t) for t in (a, d, x12, x8, big, v, w))
        cases = [("sum axis=1 f32 4096^2", a.nbytes, lambda: lib.sum(ta, 1)),
                 ("max axis=1 f32 4096^2", a.nbytes, lambda: lib.amax(ta, 1)),
                 ("sum axis=1 f64 4096^2", d.nbytes, lambda: lib.sum(td, 1)),
                 ("sum axis=None f32 4096^2", a.nbytes, lambda: lib.sum(ta)),
                 ("sum f32 12e6", x12.nbytes, lambda: lib.sum(t12)),
                 ("sum f32 8388608", x8.nbytes, lambda: lib.sum(t8)),
                 ("gemv 1x4096x4096 f32", big.nbytes, lambda: lib.matmul(tv, tb)),
                 ("gemv 4096x1x4096 f32", big.nbytes, lambda: lib.matmul(tb, tw))]
    else:  # NumPy's BLAS at its own thread count (OPENBLAS_NUM_THREADS): wall time only
        set_threads = None
        cases = [("gemv 1x4096x4096 f32", big.nbytes, lambda: np.matmul(v, big)),
                 ("gemv 4096x1x4096 f32", big.nbytes, lambda: np.matmul(big, w))]
    for label, nbytes, fn in cases:
        one = "cpu1      -" + " " * 17
        if set_threads:
            set_threads(1)
            c1 = _best(fn, False, args.blocks)
            one = f"cpu1 {nbytes / c1 / 1e9:6.1f} GB/s {c1 * 1e6:8.0f} us"
            set_threads(2)
        w2 = _best(fn, True, args.blocks)
        print(f"{args.lib:8s} {label:26s} {one}   wall2 {nbytes / w2 / 1e9:6.1f} GB/s {w2 * 1e6:8.0f} us", flush=True)


if __name__ == "__main__":
    main()
