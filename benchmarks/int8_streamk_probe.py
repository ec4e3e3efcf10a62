"""int8 (B K-contiguous, torch._int_mm's layout) on shapes whose 128 x 256 tiles leave the last wave
of 132 SMs nearly empty: the default plan, DP, SK + DP and DP + SK in the ws kernel, and SK + DP
without it, as CUDA graphs of 20 calls of coopjit.matmul(a, b, out=c, plan=...) against _int_mm's.

    python benchmarks/int8_streamk_probe.py
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
import torch  # noqa: E402
from bench_cuda_gemm import graph_timed  # noqa: E402

for (m, n, k) in [(4864, 896, 8192), (4352, 1024, 4096), (896, 4864, 8192)]:
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randint(-128, 128, (m, k), device="cuda", dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (n, k), device="cuda", dtype=torch.int8, generator=g).t()
    c = torch.empty((m, n), device="cuda", dtype=torch.int32)
    ref = torch._int_mm(a, b)
    f = 2 * m * n * k
    gth = graph_timed(lambda: torch._int_mm(a, b), 20)[0]
    print(f"{m}x{n}x{k}: _int_mm graph {f/gth/1e12:.1f} TOP/s", flush=True)
    for plan in [None, {"split": "dp"}, {"split": "sk+dp"}, {"split": "dp+sk"}, {"split": "sk+dp", "ws": "no", "persistent": "no"}]:
        try:
            c.zero_()
            coopjit.matmul(a, b, out=c, plan=plan)
            torch.cuda.synchronize()
            ok = torch.equal(c, ref)
            gt = graph_timed(lambda: coopjit.matmul(a, b, out=c, plan=plan), 20)[0]
            print(f"  {json.dumps(plan)}: graph {f/gt/1e12:.1f} TOP/s ({gt*1e6:.1f} us, x{gth/gt:.2f}) exact {ok}", flush=True)
        except Exception as e:  # noqa: BLE001 (printed)
            print(f"  {json.dumps(plan)}: failed {e!r}", flush=True)
