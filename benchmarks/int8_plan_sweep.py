"""int8 GEMM plans on torch._int_mm's layout (A M x K, B an N x K tensor's .t(): both K-major) on
an NVIDIA GPU: for each square size and each plan (a JSON list; null: the default), the time of
`coopjit.matmul(a, b, out=c, plan=plan)` as a CUDA graph of calls (the GPU's time) and per call
(with a plan dict, its per-call planning too), against torch._int_mm the same two ways; exactness
against _int_mm.

    python benchmarks/int8_plan_sweep.py 1024,2048 '[null, {"ws": 2, "split": "dp"}]'
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
import torch  # noqa: E402
from bench_cuda_gemm import graph_timed, timed  # noqa: E402

sizes = [int(x) for x in sys.argv[1].split(",")]
plans = json.loads(sys.argv[2])
for s in sizes:
    g = torch.Generator(device="cuda").manual_seed(s)
    a = torch.randint(-128, 128, (s, s), device="cuda", dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (s, s), device="cuda", dtype=torch.int8, generator=g).t()
    c = torch.empty((s, s), device="cuda", dtype=torch.int32)
    ref = torch._int_mm(a, b)
    reps = {1024: 200, 2048: 60, 4096: 15, 8192: 4}[s]
    f = 2 * s**3
    th = timed(lambda: torch._int_mm(a, b), reps)[0]
    gth = graph_timed(lambda: torch._int_mm(a, b), reps)[0]
    print(f"{s}: _int_mm per call {f/th/1e12:.1f} graph {f/gth/1e12:.1f} TOP/s ({th*1e6:.1f} / {gth*1e6:.1f} us)", flush=True)
    for plan in plans:
        try:
            c.zero_()
            coopjit.matmul(a, b, out=c, plan=plan)
            torch.cuda.synchronize()
            ok = torch.equal(c, ref)
            gt = graph_timed(lambda: coopjit.matmul(a, b, out=c, plan=plan), reps)[0]
            pt = timed(lambda: coopjit.matmul(a, b, out=c, plan=plan), reps)[0]
            print(f"  {json.dumps(plan)}: graph {f/gt/1e12:.1f} TOP/s ({gt*1e6:.1f} us, x{gth/gt:.2f} graph), per call {f/pt/1e12:.1f} ({pt*1e6:.1f} us, x{th/pt:.2f}) exact {ok}", flush=True)
        except Exception as e:
            print(f"  {json.dumps(plan)}: failed {e!r}", flush=True)
