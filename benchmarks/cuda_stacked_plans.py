"""Plans for 4096 stacked 16^3 bf16 products on cuda:0, each kernel timed alone against torch.bmm
in one run: the prepared launch (C++ GpuGemmLaunch) of every plan variant queued back to back on
the legacy default stream, CUDA events around blocks of 300 launches, medians of 5 blocks; each
result checked against float64 first. The default plan takes the FMA kernel for products of one
16 x 16 x 16 step at most (cpp/plan/gpu_plan_kernel.cpp); {"mma": "yes"} is the tensor-core pipeline.

    python benchmarks/cuda_stacked_plans.py
"""
import re

import torch

from coopjit import _core
from coopjit._bench_cuda import _timed
from coopjit._kernel_args import _gpu_overrides


def ev_time(fn, reps=300, blocks=5):
    """Median microseconds per call over `blocks` blocks of `reps` calls (CUDA events; the GPU
    benchmark's timer)."""
    return _timed(fn, reps, blocks, 0.0) * 1e6


def main():
    B = 4096
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(B, 16, 16, device="cuda", generator=g).bfloat16()
    b = torch.randn(B, 16, 16, device="cuda", generator=g).bfloat16()
    c = torch.empty(B, 16, 16, device="cuda", dtype=torch.bfloat16)
    ref = a.double() @ b.double()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"torch.bmm {ev_time(lambda: torch.bmm(a, b, out=c)):.2f} us")
    types = ["bf16", "bf16", "bf16"]
    shape = [16, 16, 16, 1, B]
    strides = [16, 1, 16, 1, 16, 1, 0, 0, 0, 256, 256, 256]
    variants = [{}, {"mma": "yes"}, {"mma": "yes", "stages": 0}, {"nr": 8}, {"kb": 16}, {"kb": 4}, {"layout": "row"},
                {"sg_n": 2}, {"nr": 32}]
    for v in variants:
        k = _core.gpu_gemm_kernel("cuda:0", types, shape, strides, False, _gpu_overrides(v), None)
        launch = k.launcher(types, shape, strides, True)
        c.zero_()
        launch.launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), 1.0, 0.0, 0)
        torch.cuda.synchronize()
        err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-2, (v, err)
        t = ev_time(lambda: launch.launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), 1.0, 0.0, 0))
        regs = dict((t_, int(n)) for t_, n in re.findall(r"\.reg \.(\w+) \s*%\w+<(\d+)>", k.ptx))
        print(f"{str(v):32s} {t:7.2f} us  rel. err {err:.1e}  blocks {launch.groups}  {k.plan_key}  PTX b32 regs "
              f"{regs.get('b32')}", flush=True)


if __name__ == "__main__":
    main()
