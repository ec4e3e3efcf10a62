"""hsq (session 29): one launch each of coopjit's plan and torch.matmul inside a profiler range,
for `ncu --profile-from-start off` (warm-ups outside the range).
    python ncu_one.py"""
import ml_dtypes, numpy as np, torch
import coopjit
DT = {"bf16": (torch.bfloat16, ml_dtypes.bfloat16), "f16": (torch.float16, np.float16)}
fns = []
for s, dt in [("8192x8192x8192", "bf16"), ("8192x8192x8192", "f16"), ("2816x1920x8192", "bf16")]:
    m, n, k = (int(x) for x in s.split("x")); tdt, ndt = DT[dt]
    a = torch.randn(m, k, device="cuda").to(tdt); b = torch.randn(k, n, device="cuda").to(tdt)
    c = torch.empty(m, n, device="cuda", dtype=tdt)
    kern = coopjit.compile_gemm(m, n, k, ndt, device="cuda:0", plan=None)
    fns += [lambda kern=kern, a=a, b=b, c=c: kern(a, b, c), lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)]
for f in fns:
    f(); f()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for f in fns:
    f()
    torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("launched", len(fns))
