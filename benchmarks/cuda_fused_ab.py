"""Issue 16 (session 21): the fused epilogues of the Hopper kernel (bias + GELU / GELU-tanh / SiLU / ReLU,
f16 + ReLU, 1024^3 + GELU, a residual, bias only) of one coopjit build against torch (addmm + the
activation) in one process; run it alternately with two PYTHONPATHs to compare builds (the label
names the build). CUDA events around blocks of 10 calls, a 0.3 s pause before each library's blocks,
the median of 5 blocks, the best of the rounds (the libraries alternate); coopjit's C against float64.
    python benchmarks/cuda_fused_ab.py LABEL OUT.json [--rounds N] [--cases SUBSTR,SUBSTR]"""
import json
import sys

import torch

import coopjit
from coopjit._bench_cuda import _timed

if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
label, out_path = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 2
only = sys.argv[sys.argv.index("--cases") + 1].split(",") if "--cases" in sys.argv else None
g = torch.Generator(device="cuda").manual_seed(5)
f64 = torch.float64
F = torch.nn.functional


def events(fn, reps=10, blocks=5, pause=0.3):
    """Median milliseconds a call (coopjit._bench_cuda._timed, in every build this script compares:
    CUDA events around blocks of calls, a warm-up call and a pause first)."""
    return _timed(fn, reps, blocks, pause) * 1e3


def gelu64(y):
    return 0.5 * y * (1 + torch.erf(y / 2 ** 0.5))


REF = {"gelu": gelu64, "gelu_tanh": lambda y: 0.5 * y * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (y + 0.044715 * y ** 3))),
       "silu": lambda y: y * torch.sigmoid(y), "relu": torch.relu, None: lambda y: y}
TORCH = {"gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu, "relu": torch.relu}


def case(name, n, dt, act, bias=True, residual=False):
    sc = n ** -0.25
    a = (torch.randn(n, n, device="cuda", generator=g) * sc).to(dt)
    b = (torch.randn(n, n, device="cuda", generator=g) * sc).to(dt)
    c = torch.empty(n, n, device="cuda", dtype=dt)
    bv = torch.randn(n, device="cuda", generator=g) if bias else None
    res = torch.randn(n, n, device="cuda", generator=g) if residual else None
    kw = {}
    if bias:
        kw["bias"] = bv
    if act:
        kw["activation"] = act
    if residual:
        kw["residual"] = res
    ours = lambda: coopjit.matmul(a, b, out=c, **kw)
    if bias:
        b16 = bv.to(dt)
        theirs = (lambda: TORCH[act](torch.addmm(b16, a, b))) if act else (lambda: torch.addmm(b16, a, b))
        if residual:
            theirs0 = theirs
            theirs = lambda: theirs0() + res
    else:
        theirs = lambda: torch.mm(a, b)
    y = a.to(f64) @ b.to(f64) + (bv.to(f64) if bias else 0)
    want = REF[act](y) + (res.to(f64) if residual else 0)
    return name, 2.0 * n ** 3, ours, theirs, c, want


CASES = [
    ("bf16 4096^3 + bias, gelu", 4096, torch.bfloat16, "gelu"),
    ("bf16 4096^3 + bias, gelu_tanh", 4096, torch.bfloat16, "gelu_tanh"),
    ("bf16 4096^3 + bias, silu", 4096, torch.bfloat16, "silu"),
    ("bf16 4096^3 + bias, relu", 4096, torch.bfloat16, "relu"),
    ("f16 4096^3 + bias, relu", 4096, torch.float16, "relu"),
    ("bf16 1024^3 + bias, gelu", 1024, torch.bfloat16, "gelu"),
    ("bf16 4096^3 + bias, gelu, f32 residual", 4096, torch.bfloat16, "gelu", True, True),
    ("bf16 4096^3 + bias", 4096, torch.bfloat16, None),
    ("bf16 4096^3 plain (torch mm)", 4096, torch.bfloat16, None, False),
]
results = []
for spec in CASES:
    name = spec[0]
    if only and not any(o in name for o in only):
        continue
    name, flops, ours, theirs, c, want = case(*spec)
    ours()
    torch.cuda.synchronize()
    err = float(((c.to(f64) - want).abs().max() / want.abs().max().clamp(min=1)).item())
    t_ours, t_torch = [], []
    for _ in range(rounds):
        t_ours.append(events(ours))
        t_torch.append(events(theirs))
    r = dict(build=label, case=name, coopjit_ms=min(t_ours), torch_ms=min(t_torch), rounds_coopjit=t_ours, rounds_torch=t_torch,
             rel_err=err, tflops=flops / min(t_ours) / 1e9)
    results.append(r)
    print(f"{label:5s} {name:42s} coopjit {r['coopjit_ms']:.4f} ms  torch {r['torch_ms']:.4f} ms  "
          f"torch/coopjit {r['torch_ms'] / r['coopjit_ms']:.2f}  rel.err {err:.1e}", flush=True)
json.dump(results, open(out_path, "w"), indent=1)
