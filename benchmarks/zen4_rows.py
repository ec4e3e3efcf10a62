"""Issue 14 on the 2-core Zen 4: the bench rows behind NumPy, measured two ways (session 17).

(a) one thread each: coopjit with set_num_threads(1) (its plan for one worker), NumPy with OpenBLAS limited to one thread
    (threadpoolctl); CPU time of the calling thread (time.thread_time(), which the VM's steal
    does not inflate) around blocks of calls, coopjit and NumPy blocks alternating, medians of the
    rounds' per-call times.
(b) both threads (coopjit's default plan, OpenBLAS's 2 threads): wall time (perf_counter) around
    blocks of calls after a pause, alternating, medians of the rounds.
The load average is printed before and after each case.

Usage: python benchmarks/zen4_rows.py [--rounds 9] [--only 1t|2t] [--plan '{"k": v}'] [case ...]
(cases by label, e.g. "f32 513x129x700"; default: all; --plan adds fields to coopjit's plan).
Recorded: benchmarks/recorded/issue14-zen4-2core-rows-session17.txt, ...-session18.txt."""
import argparse, json, os, time

import numpy as np
import threadpoolctl

import coopjit

# (label, dtype, batch or 0, M, N, K): the bench's labels are M x N x K
CASES = [
    ("f32 1x4096x4096", np.float32, 0, 1, 4096, 4096),
    ("f32 16x4096x4096", np.float32, 0, 16, 4096, 4096),
    ("f32 513x129x700", np.float32, 0, 513, 129, 700),
    ("f32 3000x500x200", np.float32, 0, 3000, 500, 200),
    ("f64 256x256x256", np.float64, 0, 256, 256, 256),
    ("f32 32x32x32", np.float32, 0, 32, 32, 32),
    ("f32 8x 512x512x512", np.float32, 8, 512, 512, 512),
    # neighbours
    ("f32 64x4096x4096", np.float32, 0, 64, 4096, 4096),
    ("f32 4x4096x4096", np.float32, 0, 4, 4096, 4096),
    ("f32 8x4096x4096", np.float32, 0, 8, 4096, 4096),
    ("f32 20x33x50", np.float32, 0, 20, 33, 50),
    ("f64 32x32x32", np.float64, 0, 32, 32, 32),
    ("f32 256x 32x32x32", np.float32, 256, 32, 32, 32),
    ("f32 4096x1x4096", np.float32, 0, 4096, 1, 4096),
    ("f32 100x37x250", np.float32, 0, 100, 37, 250),
    ("f32 64x64x64", np.float32, 0, 64, 64, 64),
    ("f32 2000x200x300", np.float32, 0, 2000, 200, 300),
    ("f32 1000x130x1000", np.float32, 0, 1000, 130, 1000),
    ("f32 256x256x256", np.float32, 0, 256, 256, 256),
    ("f64 1024x1024x1024", np.float64, 0, 1024, 1024, 1024),
    ("f64 512x512x512", np.float64, 0, 512, 512, 512),
    ("f64 128x128x128", np.float64, 0, 128, 128, 128),
    ("f32 32x 128x128x128", np.float32, 32, 128, 128, 128),
    ("f32 1024x1024x1024", np.float32, 0, 1024, 1024, 1024),
    # narrow N (session 18: half-width vectors on Zen 4)
    ("f32 100x33x250", np.float32, 0, 100, 33, 250),
    ("f32 100x20x250", np.float32, 0, 100, 20, 250),
    ("f32 100x5x250", np.float32, 0, 100, 5, 250),
    ("f32 300x37x250", np.float32, 0, 300, 37, 250),
    ("f32 1000x37x250", np.float32, 0, 1000, 37, 250),
    ("f32 64x37x64", np.float32, 0, 64, 37, 64),
    ("f64 100x17x250", np.float64, 0, 100, 17, 250),
    ("f64 100x37x250", np.float64, 0, 100, 37, 250),
    ("f32 100x48x250", np.float32, 0, 100, 48, 250),
    ("f32 8x8x8", np.float32, 0, 8, 8, 8),
    ("f32 4x4x4", np.float32, 0, 4, 4, 4),
]


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def block(f, n, clock):
    t0 = clock()
    for _ in range(n):
        f()
    return (clock() - t0) / n


def measure(fa, fb, rounds, clock, pause, target=0.05):
    """Alternating blocks of fa and fb; returns the per-call medians (and all rounds)."""
    fa(), fb()
    t = block(fa, 1, time.perf_counter)
    n = max(1, min(20000, int(target / max(t, 1e-7))))
    ta, tb = [], []
    for r in range(rounds):
        pair = [(fa, ta), (fb, tb)] if r % 2 == 0 else [(fb, tb), (fa, ta)]
        for f, out in pair:
            if pause:
                time.sleep(pause)
            f()
            out.append(block(f, n, clock))
    return float(np.median(ta)), float(np.median(tb)), ta, tb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--only", choices=["1t", "2t"])
    ap.add_argument("--plan", default="{}")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args()
    extra = json.loads(args.plan)
    rng = np.random.default_rng(0)
    threads = coopjit.get_num_threads()
    print(f"coopjit {coopjit.__version__}, numpy {np.__version__}, cpu {os.cpu_count()} cores; rounds {args.rounds};"
          f" plan extra {extra}", flush=True)
    print(f"{'case':>22} | {'1t cj us':>9} {'1t np us':>9} {'np/cj':>6} | {'2t cj us':>9} {'2t np us':>9} {'np/cj':>6} | load"
          f" | plan", flush=True)
    for label, dt, batch, m, n, k in CASES:
        if args.cases and label not in args.cases:
            continue
        shape_a, shape_b = ((batch, m, k), (batch, k, n)) if batch else ((m, k), (k, n))
        a = rng.standard_normal(shape_a).astype(dt)
        b = rng.standard_normal(shape_b).astype(dt)
        ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
        scale = np.abs(ref).max()
        for nt in (1, threads):
            coopjit.set_num_threads(nt)
            c = coopjit.matmul(a, b, plan=extra) if extra else coopjit.matmul(a, b)
            err = np.abs(c - ref).max() / scale
            assert err < 8 * np.sqrt(k) * np.finfo(dt).eps, (label, nt, err)
        l0 = load()
        r1 = r2 = (float("nan"),) * 2
        if args.only != "2t":
            coopjit.set_num_threads(1)
            f1 = (lambda: coopjit.matmul(a, b, plan=extra)) if extra else (lambda: coopjit.matmul(a, b))
            with threadpoolctl.threadpool_limits(1, "blas"):
                r1 = measure(f1, lambda: np.matmul(a, b), args.rounds, time.thread_time, 0.0)
            coopjit.set_num_threads(threads)
        if args.only != "1t":
            fc = (lambda: coopjit.matmul(a, b, plan=extra)) if extra else (lambda: coopjit.matmul(a, b))
            r2 = measure(fc, lambda: np.matmul(a, b), args.rounds, time.perf_counter, 0.3)
        # (the 2-D plan: a batch's plan differs in threads and packing)
        cfg = coopjit.cross_compile(a[0] if batch else a, b[0] if batch else b, cpu="znver4", threads=2,
                                    plan=extra or None)["config"]
        brief = " ".join(f"{f}={cfg[f]}" for f in ("layout", "simd_width", "mr", "nr", "kt", "order", "pack", "inline_b", "mc_tiles",
                                                     "threads", "split", "ksplit", "fixed_shape") if f in cfg)
        print(f"{label:>22} | {r1[0]*1e6:9.1f} {r1[1]*1e6:9.1f} {r1[1]/r1[0]:6.2f} | {r2[0]*1e6:9.1f} {r2[1]*1e6:9.1f} "
              f"{r2[1]/r2[0]:6.2f} | {l0} -> {load()} | {brief}", flush=True)


if __name__ == "__main__":
    main()
