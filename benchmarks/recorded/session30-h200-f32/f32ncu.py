"""Two launches of coopjit's f32 4096^3 (planner's plan) then two of torch.matmul (TF32 off), for ncu."""
import numpy as np, torch, coopjit
torch.backends.cuda.matmul.allow_tf32 = False
n = 4096
a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda"); c = torch.empty(n, n, device="cuda")
kern = coopjit.compile_gemm(n, n, n, np.float32, device="cuda:0")
for _ in range(2): kern(a, b, c)
torch.cuda.synchronize()
for _ in range(2): torch.matmul(a, b, out=c)
torch.cuda.synchronize()
