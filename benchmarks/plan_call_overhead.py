"""The per-call cost of plan= (autotuning loops call coopjit.matmul(a, b, plan=...) over and over):
coopjit.matmul without plan=, with a one-field dict and with a kernel's whole .config, on the CPU
in one thread's CPU time (time.thread_time, so that other work on the machine does not count) and,
where torch sees a CUDA GPU, on torch CUDA tensors in wall time over blocks of calls (the launches
queue faster than a small product runs: the host's cost a call shows as the block's time a call).
`python benchmarks/plan_call_overhead.py [cpu-size] [gpu-size]` (default 64 and 256)."""
import sys
import time

import ml_dtypes
import numpy as np

import coopjit


def per_call(fn, n=3000, clock=time.thread_time, sync=None):
    for _ in range(200):
        fn()
    if sync:
        sync()
    best = float("inf")
    for _ in range(3):
        t0 = clock()
        for _ in range(n):
            fn()
        if sync:
            sync()
        best = min(best, (clock() - t0) / n * 1e6)
    return best


def main(cpu_size=64, gpu_size=256):
    coopjit.set_num_threads(1)
    rng = np.random.default_rng(0)
    s = cpu_size
    a = rng.standard_normal((s, s)).astype(np.float32)
    b = rng.standard_normal((s, s)).astype(np.float32)
    cfg = coopjit.compile_gemm(s, s, s, np.float32).config
    print(f"CPU f32 {s}^3, us a call (one thread's CPU time, best of 3 blocks): "
          f"plain {per_call(lambda: coopjit.matmul(a, b)):.2f}, "
          f"plan={{'mr': {cfg['mr']}}} {per_call(lambda: coopjit.matmul(a, b, plan={'mr': cfg['mr']})):.2f}, "
          f"plan=kernel.config {per_call(lambda: coopjit.matmul(a, b, plan=cfg)):.2f}, "
          f"numpy {per_call(lambda: a @ b):.2f}", flush=True)
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        return
    s = gpu_size
    x = torch.randn(s, s, device="cuda").bfloat16()
    y = torch.randn(s, s, device="cuda").bfloat16()
    gcfg = coopjit.compile_gemm(s, s, s, ml_dtypes.bfloat16, device="cuda:0").config
    sync = torch.cuda.synchronize
    print(f"CUDA bf16 {s}^3 ({torch.cuda.get_device_name()}), us a call (wall time of blocks of 3000, best of 3): "
          f"plain {per_call(lambda: coopjit.matmul(x, y), clock=time.perf_counter, sync=sync):.2f}, "
          f"plan={{'stages': {gcfg['stages']}}} "
          f"{per_call(lambda: coopjit.matmul(x, y, plan={'stages': gcfg['stages']}), clock=time.perf_counter, sync=sync):.2f}, "
          f"plan=kernel.config {per_call(lambda: coopjit.matmul(x, y, plan=gcfg), clock=time.perf_counter, sync=sync):.2f}, "
          f"torch {per_call(lambda: x @ y, clock=time.perf_counter, sync=sync):.2f}", flush=True)


if __name__ == "__main__":
    main(*[int(v) for v in sys.argv[1:3]])
