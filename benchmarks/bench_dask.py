"""coopjit.dask.matmul against dask.array.matmul (NumPy chunks) on a LocalCluster of this machine: N x N float32 (16384: 1 GiB per operand), the same persisted operands and chunks for both, each library timed in its own block of runs after a pause; medians, GFLOP/s, the ratio and the fraction of the machine's measured f32 FMA peak.

    python benchmarks/bench_dask.py                     # 16384^2, LocalCluster's own workers x threads
    python benchmarks/bench_dask.py --n 8192 --repeat 5 --workers 2 --threads 1 --json out.json

Both libraries run one core per worker thread (Dask's convention: the nanny sets
OPENBLAS_NUM_THREADS=1 and friends for NumPy; coopjit.dask sets coopjit's pool to 1 in worker
processes). Kernels are compiled (coopjit) and BLAS warmed up (NumPy) by a smaller product of the
same chunks before the blocks; a run is `matmul(x, y).persist()` and waiting for it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np


def _auto_chunk(n: int, threads: int) -> int:
    """The largest power-of-two chunk with at least 4 output blocks per worker thread."""
    c = 1 << (max(1, n // 2).bit_length() - 1)
    while c > 256 and (n // c) ** 2 < 4 * threads:
        c //= 2
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--chunk", type=int, default=None, help="chunk size (default: at least 4 output blocks a thread)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per library")
    parser.add_argument("--workers", type=int, default=None, help="LocalCluster workers (default: its own choice)")
    parser.add_argument("--threads", type=int, default=None, help="threads per worker (default: its own choice)")
    parser.add_argument("--pause", type=float, default=3.0, help="seconds of rest before each block")
    parser.add_argument("--order", default="numpy,coopjit",
                        help="the order of the blocks; a library named twice gets two blocks (numpy,coopjit,numpy,coopjit: "
                             "drift on a shared machine hits both), its median over all its runs")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()

    import dask
    import dask.array as da
    import distributed
    from distributed import Client, LocalCluster, wait

    import coopjit
    import coopjit.dask as cjd

    load_start = os.getloadavg()
    peak = coopjit.peak()
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=args.threads, processes=True,
                           dashboard_address=":0", silence_logs=40)
    client = Client(cluster)
    nthreads = client.nthreads()
    threads = sum(nthreads.values())
    n = args.n
    chunk = args.chunk or _auto_chunk(n, threads)
    print(f"coopjit {coopjit.__version__} (LLVM {coopjit.llvm_version}), NumPy {np.__version__} "
          f"({_blas()}), dask {dask.__version__}, distributed {distributed.__version__}, Python "
          f"{platform.python_version()}")
    print(f"CPU {peak['cpu']}, {os.cpu_count()} CPUs; f32 FMA peak {peak['f32_fma']['all']:.0f} GFLOP/s "
          f"({peak['f32_fma']['threads']} threads), {peak['f32_fma']['single']:.0f} one thread")
    print(f"LocalCluster: {len(nthreads)} workers x {threads // len(nthreads)} threads; {n}x{n} float32 "
          f"({n * n * 4 / 2**30:.2f} GiB per operand), chunks {chunk}x{chunk} ({-(-n // chunk)}^2 blocks); "
          f"load average at start {load_start[0]:.2f}")

    rng = da.random.default_rng(0)
    x = rng.random((n, n), dtype=np.float32, chunks=chunk).persist()
    y = rng.random((n, n), dtype=np.float32, chunks=chunk).persist()
    wait([x, y])
    libs = {"numpy": da.matmul, "coopjit": cjd.matmul}
    # Warm-up: a product of 2 x 2 blocks with 2 K chunks (coopjit compiles its kernels here, once
    # per machine, through the shared disk cache; BLAS starts).
    w = min(n, 2 * chunk)
    for fn in libs.values():
        for _ in range(2):
            wait(fn(x[:w, :w], y[:w, :w]).persist())
    # A sample of the result against float64 NumPy: rows and columns of both ends.
    idx = np.r_[0:32, n - 32:n]
    xs = x[idx].compute().astype(np.float64)
    ys = y[:, idx].compute().astype(np.float64)
    ref = xs @ ys
    bound = (n + 2) * np.finfo(np.float32).eps * (np.abs(xs) @ np.abs(ys))

    flop = 2.0 * n ** 3
    results = {}
    all_times: dict = {}
    for name in args.order.split(","):
        fn = libs[name]
        time.sleep(args.pause)
        times = all_times.setdefault(name, [])
        for r in range(args.repeat):
            t0 = time.perf_counter()
            z = fn(x, y).persist()
            wait(z)
            times.append(time.perf_counter() - t0)
            if r == 0 and len(times) == 1:
                got = z[idx][:, idx].compute().astype(np.float64)
                err = float(np.max(np.abs(got - ref)))
                if not np.all(np.abs(got - ref) <= bound):
                    raise SystemExit(f"{name}: the sampled result is outside the error bound (max error {err})")
            del z
            time.sleep(1.0)  # the result's memory released
        med = statistics.median(times)
        results[name] = {"times_s": times, "median_s": med, "gflops": flop / med / 1e9,
                         "peak_fraction": flop / med / 1e9 / peak["f32_fma"]["all"]}
        print(f"{name:>8}: median {med:8.2f} s of {len(times)} ({', '.join(f'{t:.2f}' for t in times)}), "
              f"{flop / med / 1e9:7.1f} GFLOP/s, {100 * results[name]['peak_fraction']:.0f}% of the f32 FMA peak",
              flush=True)
    load_end = os.getloadavg()
    ratio = results["numpy"]["median_s"] / results["coopjit"]["median_s"]
    print(f"coopjit.dask.matmul vs dask.array.matmul: {ratio:.2f}x (target 1.2x); load average at the end "
          f"{load_end[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"n": n, "chunk": chunk, "workers": len(nthreads), "threads": threads, "repeat": args.repeat,
                       "cpu": peak["cpu"], "cpus": os.cpu_count(), "peak_f32_gflops": peak["f32_fma"]["all"],
                       "load_start": load_start, "load_end": load_end, "results": results, "ratio": ratio,
                       "versions": {"coopjit": coopjit.__version__, "numpy": np.__version__, "dask": dask.__version__,
                                    "distributed": distributed.__version__, "blas": _blas()}}, f, indent=1)
    client.close()
    cluster.close()


def _blas() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # noqa: BLE001 - only a label
        return "BLAS ?"


if __name__ == "__main__":
    main()
