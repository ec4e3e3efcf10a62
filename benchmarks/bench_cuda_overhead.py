"""Per-call cost of coopjit's products of CUDA device arrays against torch's, in one run on one GPU:
tiny products (16 x 16, where the time is the call path and the launch), the same through out=,
gemm and a compiled kernel, and 4096 stacked 16^3 bf16 products in one call against torch.bmm;
CuPy arrays (16 x 16) against cupy.matmul when CuPy is installed.

    python benchmarks/bench_cuda_overhead.py [--out table.md]

Two timings per case, medians of 7 blocks after a warm-up: "per call" is wall time per call of a
block of back-to-back calls ending with torch.cuda.synchronize() (time.perf_counter: what a Python
loop of calls costs, host path included); "GPU" is the same block between CUDA events. Every
result is checked against float64 first.
"""
import argparse
import statistics
import time

import numpy as np
import torch

import coopjit


def timed(fn, reps, blocks=7):
    """(median wall seconds per call, median CUDA-event seconds per call) over `blocks` blocks."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    time.sleep(0.05)
    wall, ev = [], []
    for _ in range(blocks):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t0) / reps)
        ev.append(s.elapsed_time(e) / 1e3 / reps)
    return statistics.median(wall), statistics.median(ev)


def check(got, a, b, tol):
    ref = a.double().cpu().numpy() @ b.double().cpu().numpy()
    err = np.abs(got.double().cpu().numpy() - ref).max() / max(1.0, np.abs(ref).max())
    assert err < tol, err
    return err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--profile", action="store_true", help="also print where a 16x16 coopjit.matmul's time goes")
    args = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []

    def add(case, ours, theirs, err):
        rows.append((case, ours[0] * 1e6, theirs[0] * 1e6, ours[1] * 1e6, theirs[1] * 1e6,
                     ours[0] / theirs[0], ours[1] / theirs[1], err))
        print(f"{case:38s} per call {ours[0] * 1e6:7.1f} us vs torch {theirs[0] * 1e6:7.1f} us ({ours[0] / theirs[0]:.2f}x)"
              f" | GPU {ours[1] * 1e6:7.1f} vs {theirs[1] * 1e6:7.1f} us ({ours[1] / theirs[1]:.2f}x)", flush=True)

    r = args.reps
    for dt, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
        name = str(dt).replace("torch.", "")
        a = torch.randn(16, 16, device="cuda", generator=g).to(dt)
        b = torch.randn(16, 16, device="cuda", generator=g).to(dt)
        err = check(coopjit.matmul(a, b), a, b, tol)
        add(f"matmul {name} 16x16", timed(lambda: coopjit.matmul(a, b), r), timed(lambda: torch.matmul(a, b), r), err)
        out = torch.empty(16, 16, device="cuda", dtype=dt)
        err = check(coopjit.matmul(a, b, out=out), a, b, tol)
        add(f"matmul {name} 16x16 out=", timed(lambda: coopjit.matmul(a, b, out=out), r),
            timed(lambda: torch.matmul(a, b, out=out), r), err)
    a = torch.randn(16, 16, device="cuda", generator=g)
    b = torch.randn(16, 16, device="cuda", generator=g)
    c = torch.randn(16, 16, device="cuda", generator=g)
    add("gemm f32 16x16 alpha=2 beta=0.5 (addmm)", timed(lambda: coopjit.gemm(a, b, c, alpha=2.0, beta=0.5), r),
        timed(lambda: torch.addmm(c, a, b, alpha=2.0, beta=0.5, out=c), r), 0.0)
    k = coopjit.compile_gemm(16, 16, 16, np.float32, device="cuda:0")
    err = check(k(a, b), a, b, 1e-5)
    add("compile_gemm(16,16,16)(a, b) f32", timed(lambda: k(a, b), r), timed(lambda: torch.matmul(a, b), r), err)
    for batch in (4096,):
        a = torch.randn(batch, 16, 16, device="cuda", generator=g).bfloat16()
        b = torch.randn(batch, 16, 16, device="cuda", generator=g).bfloat16()
        err = check(coopjit.matmul(a, b), a, b, 2e-2)
        add(f"bf16 {batch} x 16^3 stacked (bmm)", timed(lambda: coopjit.matmul(a, b), r),
            timed(lambda: torch.bmm(a, b), r), err)
        out = torch.empty(batch, 16, 16, device="cuda", dtype=torch.bfloat16)
        add(f"bf16 {batch} x 16^3 stacked out=", timed(lambda: coopjit.matmul(a, b, out=out), r),
            timed(lambda: torch.bmm(a, b, out=out), r), err)
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:  # the __cuda_array_interface__ path (no per-call cache): against cupy.matmul
        ca = cupy.asarray(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32))
        cb = cupy.asarray(np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32))
        got = torch.as_tensor(coopjit.matmul(ca, cb), device="cuda")
        err = check(got, torch.as_tensor(ca, device="cuda"), torch.as_tensor(cb, device="cuda"), 1e-5)
        add("cupy matmul f32 16x16", timed(lambda: coopjit.matmul(ca, cb), r), timed(lambda: cupy.matmul(ca, cb), r), err)
    cfg = coopjit.compile_gemm(16, 16, 16, np.float32, device="cuda:0").config
    head = (f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, coopjit {coopjit.__version__}; "
            f"16^3 f32 plan {cfg['mr']}x{cfg['nr']} sg {cfg['sg_m']}x{cfg['sg_n']}\n\n"
            "| case | coopjit us/call | torch us/call | coopjit GPU us | torch GPU us | per call ratio | GPU ratio | "
            "max err vs f64 |\n|---|---|---|---|---|---|---|---|\n")
    table = head + "".join(f"| {c} | {o:.1f} | {t:.1f} | {og:.1f} | {tg:.1f} | {ratio:.2f} | {gr:.2f} | {e:.1e} |\n"
                           for c, o, t, og, tg, ratio, gr, e in rows)
    print(table)
    if args.profile:
        import cProfile
        import pstats

        a = torch.randn(16, 16, device="cuda")
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(1000):
            coopjit.matmul(a, a)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(12)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
