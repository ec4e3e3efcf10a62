"""The per-call cost of a compiled kernel against matmul and NumPy on small products, in one
thread's CPU time (time.thread_time) so that other work on the machine does not count:
`python benchmarks/kernel_call_overhead.py [sizes...]` (default 4 16 64). Each line: us a call
for kern(a, b, c), the core's run alone, coopjit.matmul(a, b, out=c) and numpy.matmul(a, b, out=c)."""
import sys
import time

import numpy as np

import coopjit


def per_call(fn, n=3000):
    for _ in range(300):
        fn()
    t0 = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - t0) / n * 1e6


def main(sizes):
    coopjit.set_num_threads(1)
    rng = np.random.default_rng(0)
    for s in sizes:
        for dt in (np.float32, np.float64):
            a = rng.standard_normal((s, s)).astype(dt)
            b = rng.standard_normal((s, s)).astype(dt)
            c = np.empty((s, s), dt)
            kern = coopjit.compile_gemm(s, s, s, dtype=dt)
            print(f"{s}^3 {np.dtype(dt).name}: kern {per_call(lambda: kern(a, b, c)):.2f} us, "
                  f"core.run {per_call(lambda: kern._core.run(a, b, c, 1.0, 0.0)):.2f}, "
                  f"matmul {per_call(lambda: coopjit.matmul(a, b, out=c)):.2f}, "
                  f"numpy {per_call(lambda: np.matmul(a, b, out=c)):.2f}", flush=True)


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [4, 16, 64])
