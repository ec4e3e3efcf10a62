"""The 4352x1024x4096 bf16 product (136 tiles of 128 x 256 on 132 SMs) for profiling: `torchprof` prints the
kernels torch.matmul (cuBLAS) runs for it (torch.profiler); `skdp` / `dp` run coopjit's automatic plan
(2-tile SK + DP) / DP three times, for ncu (issue 16, session 16):

    python benchmarks/cuda_sk_profile.py torchprof
    ncu -k regex:gemm --launch-skip 1 --launch-count 2 --section SpeedOfLight python benchmarks/cuda_sk_profile.py skdp
"""
import sys

import ml_dtypes
import torch

import coopjit

m, n, k = 4352, 1024, 4096
g = torch.Generator(device="cuda").manual_seed(1)
a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
plans = {"skdp": None, "dp": {"split": "dp", "ws": 2}}
which = sys.argv[1] if len(sys.argv) > 1 else "all"
if which == "torchprof":
    from torch.profiler import profile, ProfilerActivity
    torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
    for e in prof.key_averages():
        print("cuBLAS kernel:", e.key, f"{e.device_time_total / 3:.1f} us a call" if hasattr(e, "device_time_total") else "")
    sys.exit(0)
for name, pl in plans.items():
    if which not in ("all", name):
        continue
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=pl)
    print(name, {x: kern.config[x] for x in ("macro_tile", "split", "sk_flags", "sk_down", "persistent", "workers")}, flush=True)
    for _ in range(3):
        kern(a, b, c)
    torch.cuda.synchronize()
