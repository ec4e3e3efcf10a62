"""The AMX plans' block of A (issue 14, session 11): where the planner now caps the row panels per
block at 1 MiB of A (mc_tiles 8 for kt 2048 bf16 / 4096 int8), the new plan against the old 48
panels, one thread and all cores; each result checked against float64 (rows 0-63 at 8192: exact
for int8), times the median of 3 alternating rounds of plan_sweep.timed blocks.

    python benchmarks/amx_block_check.py

Recorded: benchmarks/recorded/issue14-emr16-amx-session11.txt."""
import os
import time

import numpy as np

import coopjit
from _rounds import operands, timed


def main():
    if not coopjit.cpu_info()["features"].get("amx-tile"):
        print("this CPU has no AMX tiles: nothing to measure")
        return
    pk = coopjit.peak()
    rng = np.random.default_rng(0)
    cores = os.cpu_count()
    for dt, s, threads in (("bf16", 4096, 1), ("int8", 4096, 1), ("int8", 8192, cores)):
        a, b = operands(rng, dt, s, s, s)
        rows = slice(0, 64) if s > 4096 else slice(None)
        ref = a[rows].astype(np.float64) @ b.astype(np.float64)
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["single" if threads == 1 else "all"]
        plans = {"new": {"threads": threads}, "mc_tiles 48 (old)": {"threads": threads, "mc_tiles": 48}}
        out = {}
        for name, plan in plans.items():
            c = coopjit.matmul(a, b, plan=plan)
            err = float(np.max(np.abs(c[rows].astype(np.float64) - ref))) / float(np.max(np.abs(ref)))
            out[name] = ([], err, coopjit.compile_gemm(s, s, s, a.dtype, plan=plan).config["mc_tiles"])
        for _ in range(3):
            for name, plan in plans.items():
                time.sleep(0.1)
                out[name][0].append(timed(lambda: coopjit.matmul(a, b, plan=plan), seconds=0.2, blocks=3))
        for name, (ts, err, mc) in out.items():
            t = float(np.median(ts))
            rate = 2 * s ** 3 / t / 1e9
            print(f"{dt:5} {s}^3 {threads:2} threads {name:<18} mc_tiles={mc:<3} {t * 1e3:8.2f} ms {rate:7.0f} G/s "
                  f"{rate / peak * 100:5.1f}% of peak  err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
