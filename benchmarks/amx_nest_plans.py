"""Issue 14, session 15: coopjit's AMX blocked nest with the K tile / block shapes that
amx_nest_probe.c measures (kt, mc_tiles, k_inner), one thread (bf16 / int8 2048^3) and every
thread (4096^3) against the default plan and torch, in one run; each product checked against
float64 first; plan_sweep.timed blocks after a pause, alternating rounds.

    taskset -c 3 python benchmarks/amx_nest_plans.py one
    python benchmarks/amx_nest_plans.py all

Not run on the AMX host yet (session 15's run that was to measure it stopped first, see
benchmarks/recorded/issue14-emr16-amx-nest-session15.txt)."""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
from amx_probe import operands  # noqa: E402
from plan_sweep import timed  # noqa: E402

# K tiles in bf16 elements (int8: twice as many: the same bytes a panel step)
SHAPES = [{}, {"kt": 1024, "mc_tiles": 16}, {"kt": 512, "mc_tiles": 32}, {"kt": 512, "mc_tiles": 32, "k_inner": 1},
          {"kt": 256, "mc_tiles": 64}]


def plan_for(v, dt):
    return {**v, "kt": v["kt"] * 2} if dt == "int8" and "kt" in v else dict(v)


def err_of(c, ref):
    c = c.float().numpy() if hasattr(c, "numpy") else c
    return float(np.max(np.abs(c.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)


def main():
    one = sys.argv[1:] == ["one"]
    pk = coopjit.peak()
    print("peak (one core, all cores):", json.dumps({k: (round(v["single"]), round(v["all"]))
                                                     for k, v in pk.items() if k.startswith("amx")}), flush=True)
    threads = 1 if one else os.cpu_count()
    if not one:
        import torch
        torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    s = 2048 if one else 4096
    for dt in ("bf16", "int8"):
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["single" if one else "all"]
        a, b = operands(rng, dt, s, s, s)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        cases = []
        for v in SHAPES:
            plan = {**plan_for(v, dt), **({"threads": 1} if one else {})}
            cases.append((json.dumps(plan_for(v, dt)), lambda plan=plan: coopjit.matmul(a, b, plan=plan or None)))
        if not one:
            import torch
            if dt == "bf16":
                ta, tb = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16), torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
                cases.append(("torch", lambda: torch.matmul(ta, tb)))
            else:
                ta, tb = torch.from_numpy(a), torch.from_numpy(b)
                cases.append(("torch", lambda: torch._int_mm(ta, tb)))
        rows = {}
        for name, f in cases:
            rows[name] = ([], err_of(f(), ref))
        for _ in range(3):
            for name, f in cases:
                time.sleep(0.3)
                rows[name][0].append(timed(f, seconds=0.25, blocks=3))
        base = float(np.median(rows["{}"][0]))
        for name, (ts, e) in rows.items():
            t = float(np.median(ts))
            rate = 2 * s ** 3 / t / 1e9
            print(f"{dt:5} {s}^3 {threads:2} threads {name:<46} {t * 1e3:8.3f} ms {rate:7.0f} G/s {rate / peak * 100:5.1f}% "
                  f"of peak  default time / this {base / t:5.2f}  rounds {' '.join(f'{x * 1e3:.2f}' for x in ts)}  err {e:.1e}",
                  flush=True)


if __name__ == "__main__":
    main()
