"""What the CUDA probe scripts of this folder share: seeded bf16 operands on the GPU and the kernels
torch.matmul (cuBLAS) runs for a product, from torch.profiler. Scripts import it from this folder
(`python benchmarks/<script>.py`)."""
import torch


def bf16_operands(m, n, k):
    """a (m x k) and b (k x n), bf16 from float32 normal values of a generator seeded 1 (the same
    operands in every script and run), and an empty bf16 c (m x n), on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
    return a, b, torch.empty(m, n, device="cuda", dtype=torch.bfloat16)


def cublas_kernels(a, b, c, calls):
    """[(kernel name, microseconds of GPU time a call, or None where the profiler gives none)] of the
    kernels that `calls` calls of torch.matmul(a, b, out=c) run (after one call outside the profile),
    as torch.profiler's key_averages() lists them."""
    from torch.profiler import profile, ProfilerActivity
    torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
    return [(e.key, e.device_time_total / calls if hasattr(e, "device_time_total") else None)
            for e in prof.key_averages()]
