"""Hopper N tiles that fill their waves (issue 16, session 19): plans against the automatic plan and
cuBLAS (torch.matmul), in one process. CUDA graphs of 10 calls (bench_cuda_gemm.graph_timed), medians
of alternating rounds, a pause before each block; every result checked against float64 first.

    python benchmarks/cuda_waves.py SPEC.json|table|before OUT.json [--rounds 3] [--budget 180]
SPEC: a JSON list of [shape "MxNxK", dtype "bf16" | "f16", {label: plan dict | null (auto) | "cublas"}];
`table`: the automatic plan against cuBLAS on session 19's shapes; `before`: with the plans the
planner chose before session 19 named (col 128 x 256 SK + DP, 128 x 256 DP, 192 x 192).
--budget: seconds after which the remaining shapes are skipped (saying so).
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import coopjit  # noqa: E402
from bench_cuda_gemm import graph_timed  # noqa: E402

SKDP = {"layout": "col", "sg_m": 8, "nr": 256, "split": "sk+dp"}
DP256 = {"layout": "col", "sg_m": 8, "nr": 256, "split": "dp"}
T192 = {"layout": "col", "sg_m": 12, "nr": 192, "split": "dp"}
# (shape, dtype, the plan before session 19 or None where the planner's choice is unchanged)
SHAPES = [("4352x1024x4096", "bf16", SKDP), ("4352x1024x8192", "bf16", SKDP), ("4352x1024x8192", "f16", SKDP),
          ("4608x1024x8192", "bf16", SKDP), ("5632x1152x8192", "bf16", SKDP), ("2816x3456x8192", "bf16", SKDP),
          ("4224x4224x4224", "bf16", T192), ("4224x4224x8192", "bf16", T192), ("3456x4608x8192", "bf16", DP256),
          ("1024x4864x8192", "bf16", None), ("2816x1920x8192", "bf16", None), ("4864x1792x8192", "bf16", None),
          ("896x4864x8192", "bf16", None), ("4096x4096x4096", "bf16", None), ("8192x8192x8192", "bf16", None),
          ("5632x5632x8192", "bf16", DP256), ("4864x3072x8192", "bf16", DP256), ("5632x1024x8192", "bf16", SKDP)]


def named_spec(which):
    spec = []
    for s, dt, before in SHAPES:
        plans = {"cublas": "cublas", "auto": None}
        if which == "before" and before:
            plans["before"] = before
        spec.append([s, dt, plans])
    return spec


DT = {"bf16": (torch.bfloat16, ml_dtypes.bfloat16), "f16": (torch.float16, np.float16)}


def desc(cfg):
    return f"{cfg['layout']} {cfg['macro_tile']} {cfg['split']} pers={cfg['persistent'][:3]} ws={str(cfg['ws'])[:1]} tmast={str(cfg['tma_store'])[:1]}"


def main():
    spec = named_spec(sys.argv[1]) if sys.argv[1] in ("table", "before") else json.load(open(sys.argv[1]))
    out_path = sys.argv[2]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    budget = float(sys.argv[sys.argv.index("--budget") + 1]) if "--budget" in sys.argv else 1e9
    t0 = time.time()
    results = []
    for s, dt, plans in spec:
        if time.time() - t0 > budget:
            print("budget spent: skipped", s, dt, flush=True)
            continue
        m, n, k = (int(x) for x in s.split("x"))
        tdt, ndt = DT[dt]
        g = torch.Generator(device="cuda").manual_seed(1)
        a = torch.randn(m, k, device="cuda", generator=g).to(tdt)
        b = torch.randn(k, n, device="cuda", generator=g).to(tdt)
        ref = a.double() @ b.double()
        fns, outs, cfgs = {}, {}, {}
        for lab, pl in plans.items():
            outs[lab] = torch.empty(m, n, device="cuda", dtype=tdt)
            if pl == "cublas":
                fns[lab] = lambda o=outs[lab]: torch.matmul(a, b, out=o)
                continue
            try:
                kern = coopjit.compile_gemm(m, n, k, ndt, device="cuda:0", plan=pl)
            except Exception as e:  # noqa: BLE001
                print(s, dt, lab, "refused:", str(e)[:300], flush=True)
                continue
            cfgs[lab] = desc(kern.config)
            fns[lab] = lambda kern=kern, o=outs[lab]: kern(a, b, o)
        for lab, fn in fns.items():
            fn()
            torch.cuda.synchronize()
            e = ((outs[lab].double() - ref).norm() / ref.norm()).item()
            assert e < 1e-2, (s, lab, e)
        del ref
        t = {lab: [] for lab in fns}
        for _ in range(rounds):
            for lab, fn in fns.items():
                time.sleep(0.25)
                t[lab].append(graph_timed(fn, 10)[0])
        f = 2 * m * n * k
        row = {"shape": s, "dtype": dt, "plans": {}}
        for lab, v in t.items():
            med = statistics.median(v)
            row["plans"][lab] = {"us": med * 1e6, "tflops": f / med / 1e12, "all_us": [x * 1e6 for x in v], "config": cfgs.get(lab, "cublas")}
        results.append(row)
        print(s, dt, " ".join(f"{lab}={p['us']:.2f}us/{p['tflops']:.0f}T" for lab, p in row["plans"].items()), flush=True)
        for lab, c in cfgs.items():
            print("   ", lab, ":", c, flush=True)
        json.dump(results, open(out_path, "w"), indent=1)
    print(f"total {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
