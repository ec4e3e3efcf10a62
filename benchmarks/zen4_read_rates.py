"""The bandwidth-bound f32 rows of issue 14 on the 2-core Zen 4 as read rates (session 18): 4096x1x4096
(a matrix times a vector), 1 / 16 / 64 rows x 4096x4096, each as the bytes of its 64 MiB operand over the
time of a call, against coopjit.peak()'s copy bandwidth (bytes read plus written) and a read-only
reference: the sum of the same 64 MiB array (coopjit.reduce and numpy.sum).
One thread each (coopjit.set_num_threads(1), OpenBLAS at 1 thread through threadpoolctl): CPU time of
the calling thread (time.thread_time) around blocks of calls, libraries alternating, medians of rounds.
With --threads 2: wall time (perf_counter) after 0.3 s pauses (meaningful only when /proc/loadavg is low).
Usage: python benchmarks/zen4_read_rates.py [--rounds 7] [--threads 1|2] [--plan '{"k": v}']
Recorded: benchmarks/recorded/issue14-zen4-2core-rows-session18.txt."""
import argparse, json, time

import numpy as np
import threadpoolctl

import coopjit


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--plan", default="{}")
    args = ap.parse_args()
    extra = json.loads(args.plan)
    thr = args.threads
    coopjit.set_num_threads(thr)
    clock = time.thread_time if thr == 1 else time.perf_counter
    pk = coopjit.peak()
    print(f"copy peak (read + write) 1 / all threads: {pk['copy']['single']:.1f} / {pk['copy']['all']:.1f} GB/s; "
          f"threads {thr}; clock {'thread_time' if thr == 1 else 'perf_counter after 0.3 s pauses'}; plan extra {extra}",
          flush=True)
    rng = np.random.default_rng(0)
    big = rng.standard_normal((4096, 4096)).astype(np.float32)
    nbytes = big.nbytes
    cases = [("sum 4096x4096 (read only)", lambda: coopjit.reduce(big), lambda: np.sum(big))]
    for m, n in ((4096, 1), (1, 4096), (16, 4096), (64, 4096)):
        if n == 1:
            a, b = big, rng.standard_normal((4096, 1)).astype(np.float32)
        else:
            a, b = rng.standard_normal((m, 4096)).astype(np.float32), big
        c1, c2 = np.empty((a.shape[0], b.shape[1]), np.float32), np.empty((a.shape[0], b.shape[1]), np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        out = coopjit.matmul(a, b, plan=extra) if extra else coopjit.matmul(a, b)
        assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-4
        kern = coopjit.compile_gemm(a.shape[0], b.shape[1], 4096, np.float32, plan=extra or None)
        cases.append((f"f32 {a.shape[0]}x{b.shape[1]}x4096", lambda kern=kern, a=a, b=b, c1=c1: kern._core.run(a, b, c1, 1.0, 0.0),
                      lambda a=a, b=b, c2=c2: np.matmul(a, b, out=c2)))
    with threadpoolctl.threadpool_limits(thr, "blas"):
        for label, fc, fn in cases:
            fc(), fn()
            t0 = time.perf_counter(); fn(); n = max(1, int(0.1 / (time.perf_counter() - t0)))
            res = {"cj": [], "np": []}
            l0 = load()
            for r in range(args.rounds):
                for key, f in ((("cj", fc), ("np", fn)) if r % 2 == 0 else (("np", fn), ("cj", fc))):
                    if thr > 1:
                        time.sleep(0.3)
                    f(); t0 = clock()
                    for _ in range(n):
                        f()
                    res[key].append((clock() - t0) / n)
            tc, tn = np.median(res["cj"]), np.median(res["np"])
            print(f"{label:>26}: coopjit {tc*1e6:8.1f} us {nbytes/tc/1e9:5.1f} GB/s | numpy {tn*1e6:8.1f} us {nbytes/tn/1e9:5.1f} GB/s"
                  f" | np/cj {tn/tc:4.2f} | load {l0} -> {load()}", flush=True)


if __name__ == "__main__":
    main()
