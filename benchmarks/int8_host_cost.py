"""Host time a call (perf_counter over many queued calls, GPU time tiny) of coopjit.matmul
with out= on torch int8 tensors (_int_mm's layout), same operands each call (the launch's tensor maps
reused) and two B tensors alternating (the maps made again each call), against torch._int_mm.

    python benchmarks/int8_host_cost.py
"""
import statistics
import time

import torch

import coopjit

for s in (256, 1024):
    g = torch.Generator(device="cuda").manual_seed(s)
    a = torch.randint(-128, 128, (s, s), device="cuda", dtype=torch.int8, generator=g)
    b1 = torch.randint(-128, 128, (s, s), device="cuda", dtype=torch.int8, generator=g).t()
    b2 = torch.randint(-128, 128, (s, s), device="cuda", dtype=torch.int8, generator=g).t()
    c = torch.empty((s, s), device="cuda", dtype=torch.int32)
    n = 2000
    def host(fn):
        out = []
        for _ in range(7):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for i in range(n):
                fn(i)
            out.append((time.perf_counter() - t) / n)
            torch.cuda.synchronize()
        return statistics.median(out) * 1e6
    for fn in (lambda i: coopjit.matmul(a, b1, out=c), lambda i: coopjit.matmul(a, b1 if i & 1 else b2, out=c)):
        fn(0); fn(1)
    print(f"{s}^3 host us a call: coopjit same operands {host(lambda i: coopjit.matmul(a, b1, out=c)):.2f}, "
          f"alternating B (maps made each call) {host(lambda i: coopjit.matmul(a, b1 if i & 1 else b2, out=c)):.2f}, "
          f"torch._int_mm {host(lambda i: torch._int_mm(a, b1)):.2f}", flush=True)
