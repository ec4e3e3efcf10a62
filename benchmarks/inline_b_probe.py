"""Interleaved timing of one product: the peer (numpy.matmul for float32, torch.matmul for bf16,
torch._int_mm for int8) and coopjit with each plan given, in rounds (each library's calls in their
own block, a pause between blocks, each block after the machine has been quiet for 0.25 s if it
gets quiet within 8 s); prints the median and the minimum over the rounds.

    python benchmarks/inline_b_probe.py int8 64 4096 4096 - '{"inline_b": 0}'
    (dtype f32 | bf16 | int8, M N K, then plans as JSON, '-' for the planner's own; ROUNDS=9)

Written for issue 14 (session 11, plan inline_b) on the shared 2-core machine, where other
processes come and go: the minimum is the steadier figure there."""
import json
import os
import sys
import time

import numpy as np

import coopjit


def _idle():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return v[3] + v[4], sum(v)


def wait_quiet(max_wait=8.0, want=0.9):
    end = time.time() + max_wait
    while time.time() < end:
        i0, t0 = _idle()
        time.sleep(0.25)
        i1, t1 = _idle()
        if t1 > t0 and (i1 - i0) / (t1 - t0) >= want:
            return


def block(fn, reps=7, min_sample=0.005):
    """(median, minimum) seconds per call over `reps` samples (batches of calls when short)."""
    fn()
    t0 = time.perf_counter()
    fn()
    inner = max(1, int(min_sample / max(time.perf_counter() - t0, 1e-7)))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return float(np.median(samples)), min(samples)


def operands(dtype, m, n, k):
    import torch
    torch.set_num_threads(coopjit.get_num_threads())
    rng = np.random.default_rng(1)
    if dtype == "int8":
        a, b = rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        return a, b, lambda: torch._int_mm(ta, tb)
    a32, b32 = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    if dtype == "bf16":
        import ml_dtypes
        a, b = a32.astype(ml_dtypes.bfloat16), b32.astype(ml_dtypes.bfloat16)
        ta, tb = (torch.from_numpy(v.astype(np.float32)).bfloat16() for v in (a, b))
        return a, b, lambda: torch.matmul(ta, tb)
    return a32, b32, lambda: np.matmul(a32, b32)


def main(argv):
    dtype, m, n, k = argv[0], *map(int, argv[1:4])
    plans = [None if p == "-" else json.loads(p) for p in argv[4:]] or [None]
    a, b, peer = operands(dtype, m, n, k)
    calls = {"peer": peer}
    for i, p in enumerate(plans):
        calls[f"cj{i}"] = lambda p=p: coopjit.matmul(a, b, plan=p)
    med, low = {key: [] for key in calls}, {key: [] for key in calls}
    for _ in range(int(os.environ.get("ROUNDS", "5"))):
        for key, fn in calls.items():
            wait_quiet()
            md, mn = block(fn)
            med[key].append(md)
            low[key].append(mn)
            time.sleep(0.3)
    pm, pmin = np.median(med["peer"]), min(low["peer"])
    print(f"{dtype} {m}x{n}x{k}: peer med {pm * 1e6:.1f} min {pmin * 1e6:.1f} us")
    for i, p in enumerate(plans):
        c, cmin = np.median(med[f"cj{i}"]), min(low[f"cj{i}"])
        print(f"   cj{i} {p}: med {c * 1e6:.1f} min {cmin * 1e6:.1f} us  peer/cj med {pm / c:.2f} min {pmin / cmin:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
