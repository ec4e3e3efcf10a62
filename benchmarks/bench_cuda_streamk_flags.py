"""Stream-K in the warp-specialized Hopper kernel with the split tiles' fix-up inside the kernel
(plan field sk_flags: release / acquire flags) against the same splits with the fix-up launch,
each Stream-K part's K tiles upward or downward (plan field sk_down), forced DP, the automatic
plan and torch (cuBLAS), in one process. Every plan is timed as
kern(a, b, c) of torch tensors (a compile_gemm kernel: its launch queued on torch's stream) captured
`reps` times in a CUDA graph and replayed (so the host's work per call is not timed), in
alternating rounds (medians); torch.matmul the same way. Each plan's result is checked against
float64 first.

    python benchmarks/bench_cuda_streamk_flags.py [--shapes 4864x896x8192,...] [--out table.md]
"""
import argparse
import statistics

import ml_dtypes
import torch

import coopjit
from bench_cuda_gemm import graph_timed

PLANS = {  # (sk_down 0: each Stream-K part's K tiles upward, as before session 14; 1: downward)
    "auto": None,
    # the layout by the strides alone (C row-major: col), the automatic orientation before session 18
    "col": {"layout": "col"},
    "dp": {"split": "dp", "ws": 2},
    "sk+dp flags": {"split": "sk+dp", "ws": 2, "sk_flags": 1, "sk_down": 0},
    "sk+dp flags down": {"split": "sk+dp", "ws": 2, "sk_flags": 1, "sk_down": 1},
    "sk+dp fix-up": {"split": "sk+dp", "ws": 2, "sk_flags": 0, "sk_down": 0},
    "sk+dp fix-up down": {"split": "sk+dp", "ws": 2, "sk_flags": 0, "sk_down": 1},
    "sk flags": {"split": "sk", "ws": 2, "sk_flags": 1, "sk_down": 0},
    "sk flags down": {"split": "sk", "ws": 2, "sk_flags": 1, "sk_down": 1},
    "dp+sk flags": {"split": "dp+sk", "ws": 2, "sk_flags": 1, "sk_down": 0},
    # persistent DP (the kernel's walk of its tiles, the next tile's loads under this one's epilogue)
    "pers": {"split": "dp", "ws": 2, "persistent": 1},
    # 128 x 256 tiles, named (the planner's choice of session 15 for the shapes that now take 192 x 192)
    "256 dp": {"split": "dp", "ws": 2, "nr": 256, "persistent": 0},
    "256 pers": {"split": "dp", "ws": 2, "nr": 256, "persistent": 1},
    "256 sk+dp": {"split": "sk+dp", "ws": 2, "nr": 256, "sk_flags": 1, "sk_down": 1},
    # 128 x 192 tiles (two consumer warpgroups of 64 x 192)
    "n192 dp": {"split": "dp", "ws": 2, "nr": 192, "persistent": 1},
    "n192 sk+dp": {"split": "sk+dp", "ws": 2, "nr": 192, "sk_flags": 1, "sk_down": 1},
    # 192 x 192 tiles (three consumer warpgroups): DP, persistent DP, 2-tile SK + DP
    "192 dp": {"split": "dp", "ws": 2, "sg_m": 12, "nr": 192, "persistent": 0},
    "192 pers": {"split": "dp", "ws": 2, "sg_m": 12, "nr": 192, "persistent": 1},
    "192 sk+dp flags down": {"split": "sk+dp", "ws": 2, "sg_m": 12, "nr": 192, "sk_flags": 1, "sk_down": 1},
    "192 sk+dp flags": {"split": "sk+dp", "ws": 2, "sg_m": 12, "nr": 192, "sk_flags": 1, "sk_down": 0},
}
SHAPES = "4864x896x8192,4352x1024x4096,896x4864x8192,1024x4864x8192,4864x1792x8192,4224x4224x4224,4224x4224x8192,2048x2048x2048,4096x4096x4096"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    plans = {p: PLANS[p] for p in args.plans.split(",")}
    cols = list(plans) + ["torch"]
    lines = ["| shape (bf16) | tiles | auto plan | " + " | ".join(f"{c} TFLOP/s" for c in cols) +
             " | auto / dp | best flags / dp | sk+dp flags / fix-up | flags down / up | auto / torch | best flags / torch |"
             " max rel. err |",
             "|" + "---|" * (len(cols) + 10)]
    for shape in args.shapes.split(","):
        m, n, k = (int(x) for x in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(1)
        a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
        b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
        ref = a.double() @ b.double()
        outs = {p: torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for p in cols}
        kerns = {p: coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=pl) for p, pl in plans.items()}
        fns = {p: (lambda p=p: kerns[p](a, b, outs[p])) for p in plans}
        fns["torch"] = lambda: torch.matmul(a, b, out=outs["torch"])
        err = 0.0
        for p, fn in fns.items():
            fn()
            torch.cuda.synchronize()
            e = ((outs[p].double() - ref).norm() / ref.norm()).item()
            assert e < 1e-2, (shape, p, e)
            err = max(err, e)
        times = {p: [] for p in cols}
        for _ in range(args.rounds):
            for p in cols:
                times[p].append(graph_timed(fns[p], args.reps)[0])
        med = {p: statistics.median(v) for p, v in times.items()}
        cfg = (kerns["auto"] if "auto" in kerns else coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0")).config
        mt, nt = (int(x) for x in cfg["macro_tile"].split("x"))
        km, kn = (n, m) if cfg["layout"] == "col" else (m, n)
        tiles = -(-km // mt) * -(-kn // nt)
        f = 2 * m * n * k
        flags = [p for p in med if "flags" in p]
        best = min(med[p] for p in flags) if flags else float("nan")
        ratio = lambda x, y: f"{med[x] / med[y]:.2f}" if x in med and y in med else "-"  # noqa: E731
        over_best = lambda x: f"{med[x] / best:.2f}" if x in med and flags else "-"  # noqa: E731
        lines.append(f"| {shape} | {tiles} | {cfg['split']}{' flags' if str(cfg.get('sk_flags', 'no')).startswith('yes') else ''}"
                     f"{' down' if str(cfg.get('sk_down', 'no')).startswith('yes') else ''} | " +
                     " | ".join(f"{f / med[p] / 1e12:.1f}" for p in cols) +
                     f" | {ratio('dp', 'auto')} | {over_best('dp')} | {ratio('sk+dp fix-up', 'sk+dp flags')} | "
                     f"{ratio('sk+dp flags', 'sk+dp flags down')} | "
                     f"{ratio('torch', 'auto')} | {over_best('torch')} | {err:.1e} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; TFLOP/s from CUDA-graph replays of "
                     f"{args.reps} calls, medians of {args.rounds} alternating rounds; ratios are speed ratios\n\n{text}\n")


if __name__ == "__main__":
    main()
