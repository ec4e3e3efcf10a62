"""Compile time (the process's CPU time) of compile_gemm(256, 256, 256, float32) under plan= overrides,
one line a plan (session 24: plans that compile slowly; recorded in
benchmarks/recorded/plan-limits-zen5-session24.txt). Use an empty COOPJIT_CACHE_DIR so that nothing
comes from the disk cache.

    COOPJIT_CACHE_DIR=$(mktemp -d) python3 benchmarks/plan_limits_compile_s24.py cpu "[{'kb': 128, 'mr': 8, 'nr': 32}]"
    COOPJIT_CACHE_DIR=$(mktemp -d) python3 benchmarks/plan_limits_compile_s24.py opencl:0 "[{'mr': 64, 'nr': 64}]"
"""
import ast
import sys
import time

import numpy as np

import coopjit

if len(sys.argv) != 3:
    sys.exit(__doc__)
dev = sys.argv[1]
plans = ast.literal_eval(sys.argv[2])
m = 256
for plan in plans:
    c0 = time.process_time()
    try:
        coopjit.compile_gemm(m, m, m, np.float32, device=None if dev == "cpu" else dev, plan=plan)
        r = "ok"
    except Exception as e:  # noqa: BLE001 (a refusal is a result)
        r = "ERR " + str(e)[:200]
    print(plan, f"cpu {time.process_time() - c0:.1f}s", r, flush=True)
