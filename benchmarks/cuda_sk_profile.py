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
from _cuda_rounds import bf16_operands, cublas_kernels

m, n, k = 4352, 1024, 4096
a, b, c = bf16_operands(m, n, k)
plans = {"skdp": None, "dp": {"split": "dp", "ws": 2}}
which = sys.argv[1] if len(sys.argv) > 1 else "all"
if which == "torchprof":
    for key, us in cublas_kernels(a, b, c, 3):
        print("cuBLAS kernel:", key, f"{us:.1f} us a call" if us is not None else "")
    sys.exit(0)
for name, pl in plans.items():
    if which not in ("all", name):
        continue
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=pl)
    print(name, {x: kern.config[x] for x in ("macro_tile", "split", "sk_flags", "sk_down", "persistent", "workers")}, flush=True)
    for _ in range(3):
        kern(a, b, c)
    torch.cuda.synchronize()
