"""hepi (session 29, issue 16): bias + GELU fused (coopjit.matmul) vs plain vs torch addmm + gelu, one build per
process (label = build); CUDA graphs of 10 calls, 5 replays, median; correctness against float64 first.
    python epi_ab.py LABEL OUT.json"""
import json, sys, torch, coopjit
from coopjit._bench_cuda import graph_timed
label, out = sys.argv[1], sys.argv[2]
f64 = torch.float64
F = torch.nn.functional
g = torch.Generator(device="cuda").manual_seed(29)
res = []
def gelu64(y): return 0.5 * y * (1 + torch.erf(y / 2 ** 0.5))
REF = {"gelu": gelu64, "gelu_tanh": lambda y: 0.5 * y * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (y + 0.044715 * y ** 3))),
       "silu": lambda y: y * torch.sigmoid(y), "relu": torch.relu}
# correctness: values spread over [-8, 8] (scale 4 / sqrt-ish), edges, K remainders
import os
if os.environ.get("CHECK") == "1":
    for (m, n, k, dt, act, sc) in [(4096, 4096, 4096, torch.bfloat16, "gelu", 1.0), (4096, 4096, 4096, torch.bfloat16, "gelu", 4.0),
                                    (1000, 1000, 1000, torch.bfloat16, "gelu", 3.0), (777, 1030, 4100, torch.float16, "gelu", 3.0),
                                    (2048, 2048, 2048, torch.float16, "gelu", 3.0), (2048, 2048, 1000, torch.bfloat16, "gelu_tanh", 3.0),
                                    (2048, 2048, 2048, torch.bfloat16, "silu", 3.0), (2048, 2048, 2048, torch.bfloat16, "relu", 3.0)]:
        a = (torch.randn(m, k, device="cuda", generator=g) * sc * k ** -0.25).to(dt)
        b = (torch.randn(k, n, device="cuda", generator=g) * k ** -0.25).to(dt)
        bv = torch.randn(n, device="cuda", generator=g)
        c = coopjit.matmul(a, b, bias=bv, activation=act)
        want = REF[act](a.to(f64) @ b.to(f64) + bv.to(f64))
        d = (c.to(f64) - want).abs()
        tol = (2 ** -8 if dt == torch.bfloat16 else 2 ** -11) * want.abs() + 1e-3
        bad = int((d > tol).sum())
        e = float((d / (want.abs() + 1e-2)).max())
        print(f"{label} check {m}x{n}x{k} {dt} {act} scale {sc}: max rel err {e:.2e}, beyond tol {bad}", flush=True)
        res.append(dict(build=label, check=f"{m}x{n}x{k} {dt} {act} {sc}", max_rel=e, bad=bad))
for n in (2048, 4096, 8192):
    for dt in (torch.bfloat16, torch.float16):
        a = (torch.randn(n, n, device="cuda", generator=g) * n ** -0.25).to(dt)
        b = (torch.randn(n, n, device="cuda", generator=g) * n ** -0.25).to(dt)
        c = torch.empty(n, n, device="cuda", dtype=dt)
        bv = torch.randn(n, device="cuda", generator=g)
        b16 = bv.to(dt)
        fns = {"fused": lambda: coopjit.matmul(a, b, out=c, bias=bv, activation="gelu"),
               "plain": lambda: coopjit.matmul(a, b, out=c),
               "torch_addmm_gelu": lambda: F.gelu(torch.addmm(b16, a, b)),
               "torch_mm": lambda: torch.mm(a, b)}
        row = dict(build=label, n=n, dtype=str(dt))
        for name, fn in fns.items():
            t, spread = graph_timed(fn, 10, 5, 0.05)
            row[name] = t * 1e6
            row[name + "_spread"] = spread
        res.append(row)
        print(f"{label} {n}^3 {str(dt)[6:]:9s} fused {row['fused']:8.1f} us  plain {row['plain']:8.1f}  torch addmm+gelu "
              f"{row['torch_addmm_gelu']:8.1f}  torch mm {row['torch_mm']:8.1f}  torch/fused {row['torch_addmm_gelu'] / row['fused']:.3f}", flush=True)
json.dump(res, open(out, "w"), indent=1)
