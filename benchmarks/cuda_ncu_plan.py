"""One plan's kernel launched a few times, for an ncu of one launch (issue 16, session 19):

    ncu -k regex:gemm --launch-skip 1 --launch-count 1 --metrics sm__cycles_active.min,sm__cycles_active.avg,\
sm__cycles_active.max,sm__cycles_elapsed.max,gpu__time_duration.sum python benchmarks/cuda_ncu_plan.py MxNxK [PLAN_JSON]

PLAN_JSON: a plan dict (`{"layout": "col", "nr": 256, "split": "sk"}`) or `null` / nothing for the
automatic plan. bf16 in and out. (A plan with the fix-up launch (sk_flags 0) launches two kernels
whose names both match `gemm`: skip accordingly.)
"""
import json
import sys

import ml_dtypes
import torch

import coopjit


def main():
    m, n, k = (int(x) for x in sys.argv[1].split("x"))
    plan = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(k, n, device="cuda").bfloat16()
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=plan)
    print(kern.config["layout"], kern.config["macro_tile"], kern.config["split"], flush=True)
    for _ in range(3):
        kern(a, b, c)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
