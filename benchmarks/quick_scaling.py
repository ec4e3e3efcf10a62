"""Quick side-by-side timings on the machine at hand (the issue-14 figures of session 4): few-long-row
and whole-array f32 reductions against numpy.sum, f32 squares against torch.mm (and NumPy when torch
is absent). Each library is timed in its own block after a pause (spinning worker threads of the
previous library would steal cores); best of 5 blocks. Run: python benchmarks/quick_scaling.py"""
import time

import numpy as np

import coopjit

try:
    import torch
except ImportError:  # the comparison falls back to NumPy's BLAS
    torch = None


def best(f, reps=5, inner=5):
    f()
    b = 1e9
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            f()
        b = min(b, (time.perf_counter() - t) / inner)
    return b


def main():
    threads = coopjit.get_num_threads()
    if torch is not None:
        torch.set_num_threads(threads)
    print(f"coopjit {coopjit.__version__}, {threads} workers, peer threads {threads}")
    rng = np.random.default_rng(0)
    for shape, axis in [((3, 4_000_000), 1), ((8192, 8192), None), ((8192, 8192), 0), ((12_000_000,), None)]:
        x = rng.standard_normal(shape).astype(np.float32)
        time.sleep(0.5)
        tc = best(lambda: coopjit.reduce(x, axis))
        time.sleep(0.5)
        tn = best(lambda: x.sum(axis))
        print(f"reduce {shape} axis {axis}: coopjit {tc * 1e3:.2f} ms ({x.nbytes / tc / 1e9:.1f} GB/s), "
              f"numpy {tn * 1e3:.2f} ms, numpy time / coopjit time {tn / tc:.2f}")
    for n in (1024, 2048, 4096):
        a = rng.standard_normal((n, n)).astype(np.float32)
        time.sleep(0.5)
        tc = best(lambda: coopjit.matmul(a, a), 3, 3)
        time.sleep(0.5)
        if torch is not None:
            ta = torch.from_numpy(a)
            tp, peer = best(lambda: torch.mm(ta, ta), 3, 3), "torch"
        else:
            tp, peer = best(lambda: a @ a, 3, 3), "numpy"
        print(f"f32 {n}^3: coopjit {2 * n**3 / tc / 1e9:.0f} GF/s, {peer} {2 * n**3 / tp / 1e9:.0f} GF/s, "
              f"{peer} time / coopjit time {tp / tc:.2f}")


if __name__ == "__main__":
    main()
