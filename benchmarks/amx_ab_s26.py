"""Session 26 (issue 14): one thread, 2048^3 bf16 / int8, plan amx_prefetch 1 (default) / 0 / 2,
plain and prepacked B, 4 alternating rounds of blocks.

    taskset -c 3 python benchmarks/amx_ab_s26.py

Recorded: benchmarks/recorded/issue14-emr16-amx-session26.txt."""
import json, sys, time, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np, coopjit
from _rounds import operands, timed
rng = np.random.default_rng(0)
pk = coopjit.peak()
res = {}
for dt in ("int8", "bf16"):
    peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["single"]
    s = 2048
    a, b = operands(rng, dt, s, s, s)
    cases = []
    for v in ({}, {"amx_prefetch": 0}, {"amx_prefetch": 2}):
        plan = {"threads": 1, **v}
        pb = coopjit.prepack(b, plan=plan)
        cases.append((json.dumps(v) + " plain", (lambda plan=plan: coopjit.matmul(a, b, plan=plan))))
        cases.append((json.dumps(v) + " prepB", (lambda plan=plan, pb=pb: coopjit.matmul(a, pb, plan=plan))))
    for r in range(4):
        for name, f in (cases if r % 2 == 0 else cases[::-1]):
            time.sleep(0.2)
            t = timed(f, seconds=0.3, blocks=5)
            res.setdefault((dt, name), []).append(t)
    for name, _ in cases:
        v = res[(dt, name)]
        rt = [2 * s**3 / t / peak / 1e9 * 100 for t in v]
        print(f"{dt} {s}^3 1 thread {name:28} median {np.median(v)*1e3:7.2f} ms [{min(v)*1e3:.2f}-{max(v)*1e3:.2f}]  {np.median(rt):5.1f}% of core peak [{min(rt):.1f}-{max(rt):.1f}]", flush=True)
