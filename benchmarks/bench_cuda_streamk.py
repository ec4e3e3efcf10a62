"""Stream-K against data-parallel plans of coopjit's tensor-core pipeline on an NVIDIA GPU, on
shapes whose 128 x 128 tiles leave the persistent grid's last wave partly empty. The plans are
timed in alternating rounds (CUDA events, medians), so that clock drift does not favour one.

    python benchmarks/bench_cuda_streamk.py [--out table.md] [--mma]

--mma: every plan with wgmma=0, the mma.sync pipeline that GPUs before Hopper (sm_80) run, on this
GPU (on sm_90 the automatic plan is otherwise the wgmma kernel).
"""
import argparse
import statistics

import torch

from bench_cuda_gemm import gemm_case

PLANS = {"auto": None, "dp": {"split": "dp"}, "sk": {"split": "sk"}, "sk+dp": {"split": "sk+dp"}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mma", action="store_true", help="every plan with wgmma=0 (the mma.sync pipeline of sm_80)")
    args = ap.parse_args()
    plans = {name: ({**(plan or {}), "wgmma": 0} if args.mma else plan) for name, plan in PLANS.items()}
    lines = ["| M x N x K | tiles | auto plan | auto / dp | sk / dp | sk+dp / dp | dp TFLOP/s |", "|---|---|---|---|---|---|---|"]
    for m, n, k in ((2304, 2304, 8192), (1536, 1536, 16384), (2560, 2560, 8192)):
        times = {p: [] for p in plans}
        split = None
        for _ in range(args.rounds):
            for name, plan in plans.items():
                t, _, err, cfg = gemm_case(m, n, k, torch.bfloat16, torch.bfloat16, plan=plan, reps=10)
                assert err < 1e-2, (name, err)
                times[name].append(t)
                if name == "auto":
                    split = cfg["split"]
        med = {p: statistics.median(v) for p, v in times.items()}
        tiles = ((m + 127) // 128) * ((n + 127) // 128)
        lines.append(f"| {m} x {n} x {k} | {tiles} | {split} | {med['dp'] / med['auto']:.2f} | {med['dp'] / med['sk']:.2f} | "
                     f"{med['dp'] / med['sk+dp']:.2f} | {2 * m * n * k / med['dp'] / 1e12:.1f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"device: {torch.cuda.get_device_name()}{' (mma.sync plans: wgmma=0)' if args.mma else ''}; speed ratios (dp time / plan time), medians of {args.rounds} "
                    f"alternating rounds\n\n{text}\n")


if __name__ == "__main__":
    main()
