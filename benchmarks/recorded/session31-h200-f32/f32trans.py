"""Lead, session 30: f32 4096^3 on CUDA cores in the four transpose forms (coopjit.gemm with
trans_a / trans_b against torch.matmul on the same views, TF32 off), CUDA graphs of 10 calls,
3 alternating rounds, medians; each result checked against float64 first."""
import os, statistics, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import torch, coopjit
from bench_cuda_gemm import graph_timed
torch.backends.cuda.matmul.allow_tf32 = False
n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
g = torch.Generator(device="cuda").manual_seed(3)
for ta in (False, True):
    for tb in (False, True):
        a = torch.randn(n, n, device="cuda", generator=g); b = torch.randn(n, n, device="cuda", generator=g)
        A, B = (a.T if ta else a), (b.T if tb else b)
        c1 = torch.empty(n, n, device="cuda"); c2 = torch.empty(n, n, device="cuda")
        fc = lambda: coopjit.gemm(a, b, c1, trans_a=ta, trans_b=tb, device="cuda:0")
        ft = lambda: torch.matmul(A, B, out=c2)
        fc(); ft(); torch.cuda.synchronize()
        ref = A.double() @ B.double()
        ec = ((c1.double() - ref).norm() / ref.norm()).item(); et = ((c2.double() - ref).norm() / ref.norm()).item()
        t = {"coopjit": [], "torch": []}
        for r in range(3):
            for lab in (("coopjit", "torch") if r % 2 == 0 else ("torch", "coopjit")):
                time.sleep(0.2)
                t[lab].append(graph_timed(fc if lab == "coopjit" else ft, 10)[0])
        mc, mt = statistics.median(t["coopjit"]), statistics.median(t["torch"])
        print(f"f32 {n}^3 trans_a={ta:d} trans_b={tb:d}: coopjit {mc*1e6:8.1f} us {2*n**3/mc/1e12:5.1f} TF/s  torch {mt*1e6:8.1f} us  torch/coopjit {mt/mc:.3f}  err {ec:.1e} / {et:.1e}", flush=True)
