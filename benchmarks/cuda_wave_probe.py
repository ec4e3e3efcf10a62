"""Where a wave of Hopper wgmma tiles spends its time: coopjit's bf16 GEMM kernels as CUDA graphs
(GPU time only: no Python, no launch preparation), torch (cuBLAS) in the same process on the same
device tensors. Used for issue 16, session 11 (benchmarks/recorded/issue16-h100-session11.md).

    python benchmarks/cuda_wave_probe.py epilogue     # the staged epilogue (plan field epi_smem) on and off, ws 2 / no
    python benchmarks/cuda_wave_probe.py persistent   # the persistent ws grid (plan field persistent), group_m bands
    python benchmarks/cuda_wave_probe.py stores TAG   # bf16 out, default / ws=no / layout=row (two builds: run once each)

1536 x 2816 is one wave of 132 tiles of 128 x 256 on an H100 (the kernel's M is N: layout col).
"""
import sys

import ml_dtypes
import numpy as np
import torch

import coopjit
from bench_cuda_gemm import graph_timed

torch.backends.cuda.matmul.allow_tf32 = False


def run(shapes, plans, outs=((torch.bfloat16, ml_dtypes.bfloat16),), tag="", reps_of=lambda m: 10):
    for (m, n, k) in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ref = a.double() @ b.double()
        reps = reps_of(m)
        for odt, onp in outs:
            c = torch.empty(m, n, device="cuda", dtype=odt)
            tt = graph_timed(lambda: torch.matmul(a, b, out=c), reps)[0] if odt == torch.bfloat16 else None
            for plan in plans:
                kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=dict(plan, split="dp"), out_dtype=onp)
                c.zero_()
                t = graph_timed(lambda: kern(a, b, c), reps)[0]
                err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
                rel = f"{tt / t:.2f}" if tt else "-"
                print(f"| {tag}{m}x{n}x{k} | {str(odt)[6:]} | {plan or 'default'} | {t * 1e6:.1f} | {2 * m * n * k / t / 1e12:.0f} | "
                      f"{rel} | {err:.1e} |", flush=True)
            if tt:
                print(f"| {tag}{m}x{n}x{k} | {str(odt)[6:]} | torch | {tt * 1e6:.1f} | {2 * m * n * k / tt / 1e12:.0f} | 1.00 | |", flush=True)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "epilogue"
    print("| M x N x K | out | plan | us (graph) | TFLOP/s | / torch | max rel err |\n|---|---|---|---|---|---|---|")
    if mode == "epilogue":
        run([(1536, 2816, 64), (1536, 2816, 1024), (2048, 2048, 2048), (4096, 4096, 4096)],
            [{"ws": 2, "epi_smem": "yes"}, {"ws": 2, "epi_smem": "no"}, {"ws": "no", "epi_smem": "yes"}, {"ws": "no", "epi_smem": "no"}],
            outs=((torch.bfloat16, ml_dtypes.bfloat16), (torch.float32, np.float32)))
    elif mode == "persistent":
        run([(1536, 2816, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (4224, 4224, 4096), (896, 4864, 8192)],
            [{}, {"persistent": "yes"}, {"persistent": "yes", "group_m": 8}, {"group_m": 8}, {"epi_smem": "no"}],
            reps_of=lambda m: 3 if m >= 8192 else 10)
    elif mode == "stores":
        run([(1536, 2816, 64), (1536, 2816, 1024), (2048, 2048, 2048), (4096, 4096, 4096)],
            [{}, {"ws": "no"}, {"layout": "row"}], tag=(sys.argv[2] + " ") if len(sys.argv) > 2 else "")
    else:
        raise SystemExit(f"unknown mode {mode!r}: epilogue, persistent or stores")


if __name__ == "__main__":
    main()
