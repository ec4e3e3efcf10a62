"""One thread's CPU time a call (time.thread_time) of the default plan of one product, the plans
named on the command line, and numpy.matmul, in alternating rounds (medians and minima of 7):

    OPENBLAS_NUM_THREADS=1 python benchmarks/cpu_plan_ab.py M N K DTYPE '[{"mr": 6, "nr": 8}, ...]'

Run it under two builds' PYTHONPATHs to compare them (the default plan's line)."""
import json
import sys
import time

import numpy as np

import coopjit


def per_call(fn, n):
    for _ in range(50):
        fn()
    t0 = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - t0) / n * 1e6


def main():
    rng = np.random.default_rng(0)
    coopjit.set_num_threads(1)
    m, n, k = (int(x) for x in sys.argv[1:4])
    dt = np.dtype(sys.argv[4])
    plans = json.loads(sys.argv[5]) if len(sys.argv) > 5 else []
    a = rng.standard_normal((m, k)).astype(dt)
    b = rng.standard_normal((k, n)).astype(dt)
    c = np.empty((m, n), dt)
    base = coopjit.compile_gemm(m, n, k, dtype=dt)
    kerns = [("default %dx%d" % (base.config["mr"], base.config["nr"]), base)]
    for p in plans:
        kerns.append((str(p), coopjit.compile_gemm(m, n, k, dtype=dt, plan=dict(p, threads=1,
                                                                                   simd_width=base.config["simd_width"]))))
    kerns.append(("numpy", None))
    calls = max(5, int(2e8 / (2.0 * m * n * k)))
    res = {name: [] for name, _ in kerns}
    for _ in range(7):
        for name, kern in kerns:
            fn = (lambda: np.matmul(a, b, out=c)) if kern is None else (lambda kern=kern: kern(a, b, c))
            res[name].append(per_call(fn, calls))
    for name, ts in res.items():
        print("%-40s median %.2f us, min %.2f" % (name, np.median(ts), min(ts)))


if __name__ == "__main__":
    main()
