"""Fused GEMM epilogues on an NVIDIA GPU against torch (cuBLAS) in one run: CUDA events around
blocks of calls on device tensors (the compiled kernel runs on the tensors' pointers, no copies),
a warm-up first, a pause before each library's blocks, medians of the blocks.

    python benchmarks/bench_cuda_epilogue.py [--n 4096] [--out table.md]

Rows (bf16 operands, f32 accumulation, bf16 out): + bias then GELU (erf), and + bias, GELU and a
residual, each against torch's unfused addmm + gelu (+ add) and its fused
torch._addmm_activation (cuBLASLt's bias + GELU epilogue, the tanh form)."""
import argparse
import statistics
import time

import numpy as np
import torch

import coopjit
from coopjit import _core
from coopjit._epilogue import Epilogue

DEV = "cuda:0"


def timed(fn, reps=10, blocks=5):
    fn()
    torch.cuda.synchronize()
    time.sleep(0.2)
    out = []
    for _ in range(blocks):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) / 1e3 / reps)
    return statistics.median(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    n = args.n
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
    bias = torch.randn(n, device="cuda", generator=g)
    bias16 = bias.to(torch.bfloat16)
    res = torch.randn(n, n, device="cuda", generator=g)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    import ml_dtypes
    rows = []
    for with_res in (False, True):
        ep = Epilogue("bench", np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.bfloat16), n, n, bias=True,
                      activation="gelu", residual=True if with_res else None)
        types = ["bf16", "bf16", "bf16"]
        shape, strides = [n, n, n, 1, 1], [n, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0]
        core = _core.gpu_gemm_kernel(DEV, types, shape, strides, False, {}, ep.steps())
        epi = [0, 0, bias.data_ptr(), res.data_ptr() if with_res else 0]
        run = lambda: core.run(types, shape, strides, a.data_ptr(), b.data_ptr(), c.data_ptr(), 1.0, 0.0, epi)  # noqa: E731
        run()
        torch.cuda.synchronize()
        y = a.double() @ b.double() + bias.double()
        ref = 0.5 * y * (1 + torch.erf(y / 2 ** 0.5))
        if with_res:
            ref = ref + res.double()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        t_cj = timed(run)
        if with_res:
            unfused = lambda: torch.nn.functional.gelu(torch.addmm(bias16, a, b)).add_(res)  # noqa: E731
            fused_t = lambda: torch._addmm_activation(bias16, a, b, use_gelu=True).add_(res)  # noqa: E731
        else:
            unfused = lambda: torch.nn.functional.gelu(torch.addmm(bias16, a, b))  # noqa: E731
            fused_t = lambda: torch._addmm_activation(bias16, a, b, use_gelu=True)  # noqa: E731
        t_un = timed(unfused)
        t_fu = timed(fused_t)
        flops = 2.0 * n ** 3
        name = f"bf16 {n}^3 + bias, gelu" + (", + residual" if with_res else "")
        rows.append((name, t_cj, t_un, t_fu, flops, err, core.config))
    lines = [f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; coopjit {coopjit.__version__}", "",
             "| case | coopjit fused | torch addmm + gelu | torch _addmm_activation (cuBLASLt) | ratios | rel. error |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, t_cj, t_un, t_fu, flops, err, cfg in rows:
        lines.append(f"| {name} | {t_cj * 1e3:.3f} ms, {flops / t_cj / 1e12:.0f} TF/s | {t_un * 1e3:.3f} ms | "
                     f"{t_fu * 1e3:.3f} ms | {t_un / t_cj:.2f}x / {t_fu / t_cj:.2f}x | {err:.1e} |")
    lines.append("")
    lines.append(f"plan: {dict(rows[0][6])}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
