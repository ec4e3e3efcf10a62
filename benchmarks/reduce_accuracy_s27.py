"""Float sums' error against float64 along every form of coopjit.reduce (session 27), coopjit beside
NumPy (its pairwise sum along a contiguous or strided axis; float16 / bfloat16 summed with
dtype=float32, coopjit's accumulator). Uniform [0, 1) data (every term positive: rounding errors
do not cancel) and stride-0 broadcasts of one value (the same rounding every step: the worst case
of a linear chain). Max relative error over the outputs; not a timing.

    PYTHONPATH=<build> python3 benchmarks/reduce_accuracy_s27.py [--threads 1,2]
"""
import argparse

import ml_dtypes
import numpy as np

import coopjit

BF16 = ml_dtypes.bfloat16


def rel(got, exact):
    got = np.asarray(got, np.float64)
    return float(np.max(np.abs(got - exact) / np.abs(exact)))


def cases(rng):
    u = lambda shape, dt=np.float32: rng.random(shape, dtype=np.float32).astype(dt)  # noqa: E731
    yield "1-D 2^24", u(2**24), None
    yield "1-D 12e6", u(12_000_000), None
    yield "1-D 2^25 [::3]", u(3 * 2**23)[::3], None
    yield "1-D 2^24 bf16", u(2**24, BF16), None
    yield "1-D 2^24 f16", (rng.random(2**24, dtype=np.float32) / 2**14).astype(np.float16), None
    yield "stride-0 0.1 x 1e6", np.broadcast_to(np.float32(0.1), (10**6,)), None
    yield "stride-0 0.1 x 2^24", np.broadcast_to(np.float32(0.1), (2**24,)), None
    yield "stride-0 (1e6, 1) axis 0", np.broadcast_to(np.float32([[0.7]]), (10**6, 1)), 0
    yield "(3, 4e6) axis 1", u((3, 4_000_000)), 1
    yield "(4, 2^22) axis 1", u((4, 2**22)), 1
    yield "(64, 1e6) axis 1", u((64, 1_000_000)), 1
    yield "(64, 1e6) axis 1 bf16", u((64, 1_000_000), BF16), 1
    yield "(64, 2^20)[:, ::2] axis 1", u((64, 2**20))[:, ::2], 1
    yield "(8192, 8192) axis 1", u((8192, 8192)), 1
    yield "(8192, 8192) axis None", u((8192, 8192)), None
    yield "(8192, 8192) axis 0", u((8192, 8192)), 0
    yield "(4e6, 3) axis 0", u((4_000_000, 3)), 0
    yield "(1e6, 64) axis 1", u((1_000_000, 64)), 1
    yield "(64, 512, 512) axis (1, 2)", u((64, 512, 512)), (1, 2)
    yield "(512, 512, 64) axis (0, 1)", u((512, 512, 64)), (0, 1)
    yield "stride-0 (64, 1e6) axis 1", np.broadcast_to(rng.random((64, 1), dtype=np.float32), (64, 10**6)), 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    for t in (int(v) for v in args.threads.split(",")):
        coopjit.set_num_threads(t)
        print(f"## {t} thread(s): max relative error against float64")
        print(f"{'case':>30} {'coopjit':>9} {'NumPy':>9}")
        for name, x, axis in cases(np.random.default_rng(27)):
            exact = np.sum(x.astype(np.float64), axis=axis)
            mine = coopjit.reduce(x, axis=axis)
            theirs = np.sum(x, axis=axis, dtype=np.float32)
            print(f"{name:>30} {rel(mine, exact):9.1e} {rel(theirs, exact):9.1e}", flush=True)


if __name__ == "__main__":
    main()
