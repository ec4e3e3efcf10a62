"""The Hopper kernel's C through TMA stores (plan field tma_store) against the lanes' 16-byte stores
from the same staging (tma_store 0) and torch (cuBLAS / torch._int_mm), on the same device tensors,
as CUDA graphs of coopjit.matmul(a, b, out=c, plan=...) calls (the GPU's time: without the host's
per-call work), the three interleaved over `--rounds` rounds (the median of the rounds' medians).
    python benchmarks/tma_store_probe.py [--rounds 3] [--only bf16,f16,edge,pers,int8] [--out table.md]
Rows: bf16 / f16 2048^3 / 4096^3 / 8192^3 and bf16 4224^3 (the default plan: the warp-specialized
kernel, one tile a block); bf16 896 x 4864 x 8192 (152 tiles of 128 x 256 on 132 SMs whose last
256-row strip is half empty: edge tiles) against 1024 x 4864 x 8192 (the same tiles, none an edge);
bf16 4096^3 with the persistent walk (a tile's last box in flight under the next tile's K loop);
int8 1024-8192 (B K-contiguous, the default plan) against torch._int_mm; (smallk) products whose
epilogue is a large share of the time: 8192^2 tiles at K 64 / 256, f32 out (8 boxes a warp; torch
there: its 16-bit output).
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

import coopjit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cuda_gemm import NP, graph_timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="bf16,f16,edge,pers,int8", help="groups of rows: bf16, f16, edge, pers, int8, smallk")
    ap.add_argument("--out", default=None)
    ap.add_argument("--base", default="no", help="the tma_store of the first column (no, yes, 2)")
    ap.add_argument("--variant", default="yes", help="the tma_store of the second column (2: boxes of a warpgroup)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    B, V = args.base, args.variant
    lines = [f"| case | plan | tma_store {B} | tma_store {V} | torch | {V} / {B} | {V} / torch | {B} / torch | exact / rel. err {V}, {B} |",
             "|" + "---|" * 9]
    cases = []
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        if name in only:
            cases += [(name, dt, (s, s, s), {}) for s in (2048, 4096, 8192)]
    if "bf16" in only:
        cases.append(("bf16", torch.bfloat16, (4224, 4224, 4224), {}))
    if "edge" in only:
        cases += [("bf16", torch.bfloat16, (896, 4864, 8192), {"split": "dp"}), ("bf16", torch.bfloat16, (1024, 4864, 8192), {"split": "dp"}),
                  ("bf16", torch.bfloat16, (896, 4864, 8192), {"split": "sk+dp"}),
                  ("bf16", torch.bfloat16, (1024, 4864, 8192), {"split": "sk+dp"})]
    if "smallk" in only:  # the epilogue's share large: 2048 tiles of K 64 / 256 (bf16 out), and f32 out (8 boxes a warp)
        cases += [("bf16", torch.bfloat16, (8192, 8192, 64), {}), ("bf16", torch.bfloat16, (8192, 8192, 256), {}),
                  ("bf16 -> f32", torch.bfloat16, (8192, 8192, 64), {}), ("f16 -> f32", torch.float16, (4096, 4096, 1024), {})]
    if "pers" in only:
        cases.append(("bf16", torch.bfloat16, (4096, 4096, 4096), {"persistent": "yes"}))
    if "int8" in only:
        cases += [("int8", torch.int8, (s, s, s), {}) for s in (1024, 2048, 4096, 8192)]
    for name, dt, (m, n, k), plan in cases:
        g = torch.Generator(device="cuda").manual_seed(m + n + k)
        if dt is torch.int8:
            a = torch.randint(-128, 128, (m, k), device="cuda", dtype=dt, generator=g)
            b = torch.randint(-128, 128, (n, k), device="cuda", dtype=dt, generator=g).t()  # K-contiguous: _int_mm's layout
            c = torch.empty(m, n, device="cuda", dtype=torch.int32)
            theirs = lambda: torch._int_mm(a, b)  # noqa: E731
            ref = torch._int_mm(a, b)
        else:
            a = torch.randn(m, k, device="cuda", generator=g).to(dt)
            b = torch.randn(k, n, device="cuda", generator=g).to(dt)
            c = torch.empty(m, n, device="cuda", dtype=torch.float32 if "f32" in name else dt)
            theirs = lambda: torch.matmul(a, b)  # noqa: E731  (f32-out rows: torch's 16-bit output)
            ref = torch.matmul(a.double(), b.double())
        reps = max(2, min(200, int(4e11 / (2 * m * n * k))))
        conv = lambda v: int(v) if v.isdigit() else v  # noqa: E731
        runs = {v: (lambda v=v: coopjit.matmul(a, b, out=c, plan=dict(plan, tma_store=conv(v)))) for v in ("no", "yes")}
        runs = {"no": runs["no"], "yes": runs["yes"]} if (B, V) == ("no", "yes") else \
            {"no": lambda: coopjit.matmul(a, b, out=c, plan=dict(plan, tma_store=conv(B))),
             "yes": lambda: coopjit.matmul(a, b, out=c, plan=dict(plan, tma_store=conv(V)))}
        errs = {}
        for v, fn in runs.items():
            c.zero_()
            fn()
            torch.cuda.synchronize()
            errs[v] = torch.equal(c, ref) if dt is torch.int8 else ((c.double() - ref).norm() / ref.norm()).item()
        del ref
        times = {"no": [], "yes": [], "torch": []}
        for _ in range(args.rounds):
            for key, fn in (("no", runs["no"]), ("yes", runs["yes"]), ("torch", theirs)):
                times[key].append(graph_timed(fn, reps)[0])
        t = {key: statistics.median(v) for key, v in times.items()}
        f = 2 * m * n * k / 1e12
        unit = "TOP/s" if dt is torch.int8 else "TFLOP/s"
        cfg = coopjit.compile_gemm(m, n, k, NP[dt], device="cuda:0", trans_b=dt is torch.int8, plan=dict(plan, tma_store=conv(V)),
                                   out_dtype=NP[c.dtype] if dt is not torch.int8 else None).config
        desc = f"{cfg['macro_tile']} {cfg['split']} ws {str(cfg['ws']).split(':')[0]} pers {cfg['persistent'][:3]} {plan or ''}"
        err = f"{errs['yes']} / {errs['no']}" if dt is torch.int8 else f"{errs['yes']:.1e} / {errs['no']:.1e}"
        lines.append(f"| {name} {m}x{n}x{k} | {desc} | {f / t['no']:.1f} {unit} ({t['no'] * 1e6:.1f} us) | "
                     f"{f / t['yes']:.1f} ({t['yes'] * 1e6:.1f} us) | {f / t['torch']:.1f} ({t['torch'] * 1e6:.1f} us) | "
                     f"{t['no'] / t['yes']:.3f} | {t['torch'] / t['yes']:.2f} | {t['torch'] / t['no']:.2f} | {err} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}\n\n{text}\n")


if __name__ == "__main__":
    main()
