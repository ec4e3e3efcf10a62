"""Issue 14, session 15: coopjit's AMX blocked nest with the K tile / block shapes that
amx_nest_probe.c measures (kt, mc_tiles, k_inner) against the default plan and torch, in one
run; each product checked against float64 first (8192: its first 256 rows); _rounds.timed
blocks after a pause, alternating rounds; medians.

    taskset -c 3 python benchmarks/amx_nest_plans.py one 1024 2048     # one thread (no torch)
    python benchmarks/amx_nest_plans.py all 1024 4096 8192             # every thread, with torch
    python benchmarks/amx_nest_plans.py skinny [M N]                   # M x N x N (64 x 4096): B packed
                                                                       # per call / prepacked / inline_b
    taskset -c 3 python benchmarks/amx_nest_plans.py nc-one 2048       # session 16: the column-panel order
    python benchmarks/amx_nest_plans.py nc 1024 2048 4096 8192         # (plan nc_tiles) against the default

The figures of session 15 are in benchmarks/recorded/issue14-emr16-amx-nest-session15.txt, of
session 16 (nc modes) in benchmarks/recorded/issue14-emr16-amx-nc-tiles-session16.txt."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
from _rounds import amx_peak, measure, operands, torch_case  # noqa: E402

# K tiles in bf16 elements (int8: twice as many: the same bytes a panel step)
SHAPES = [{}, {"kt": 1024, "mc_tiles": 16}, {"kt": 512, "mc_tiles": 32}, {"kt": 512, "mc_tiles": 32, "k_inner": 1},
          {"kt": 256, "mc_tiles": 64}, {"kt": 512, "mc_tiles": 8}]

# Session 16: blocks of column panels (plan nc_tiles; kt in bf16 elements as above)
NC_SHAPES = [{}, {"nc_tiles": 1}, {"nc_tiles": 2}, {"nc_tiles": 4}, {"nc_tiles": 8}, {"kt": 1024, "nc_tiles": 8}]

INLINE = [{"inline_b": 1}, {"inline_b": 1, "kt": 1024}, {"inline_b": 1, "kt": 2048}]


def plan_for(v, dt):
    return {**v, "kt": v["kt"] * 2} if dt == "int8" and "kt" in v else dict(v)


def config_of(a, b, plan):
    """The plan's nest fields for these operands (the planner's choices where the plan names none)."""
    out = np.int32 if a.dtype == np.int8 else np.float32
    types = coopjit._arrays.gemm_types(a.dtype, b.dtype, np.dtype(out))[0]
    c = np.empty((a.shape[0], b.shape[1]), out)
    cfg = coopjit._plan.from_core(coopjit._core.gemm_plan(a, b, c, False, types, coopjit._gemm._overrides(plan)))
    return " ".join(f"{k}={cfg[k]}" for k in ("split", "threads", "shares", "grid_m", "kt", "mc_tiles", "nc_tiles", "direct_a"))


def main():
    mode, sizes = sys.argv[1], [int(x) for x in sys.argv[2:]]
    one = mode in ("one", "nc-one")
    shapes = NC_SHAPES if mode.startswith("nc") else SHAPES
    pk, emu = amx_peak()  # no AMX here: the emulated tiles (a check of this script, not a timing)
    threads = 1 if one else os.cpu_count()
    if not one:
        import torch
        torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    for dt in ("bf16", "int8"):
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["single" if one else "all"]
        if mode == "skinny":
            m, n = (sizes + [64, 4096])[:2]
            a, b = operands(rng, dt, m, n, n)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            plan = {"amx": 2} if emu else None
            pb = coopjit.prepack(b, plan=plan)
            cases = [("{}", lambda: coopjit.matmul(a, b, plan=plan)),
                     ("{} B prepacked", lambda: coopjit.matmul(a, pb, plan=plan))]
            for v in INLINE:  # B packed by its reader (plan inline_b)
                pv = {**plan_for(v, dt), **(plan or {})}
                cases.append((json.dumps(plan_for(v, dt)), lambda pv=pv: coopjit.matmul(a, b, plan=pv)))
            cases.append(("torch", torch_case(a, b, dt)))
            measure(f"{dt:5} {m}x{n}x{n} {threads:2} threads", cases, ref, 2.0 * m * n * n, peak, 0.15, base_label="default", width=46)
            continue
        for s in sizes:
            a, b = operands(rng, dt, s, s, s)
            rows = min(s, 256 if s > 4096 else s)
            ref = a[:rows].astype(np.float64) @ b.astype(np.float64)
            cases = []
            for v in shapes:
                plan = {**plan_for(v, dt), **({"threads": 1} if one else {}), **({"amx": 2} if emu else {})}
                cases.append((json.dumps(plan_for(v, dt)), lambda plan=plan: coopjit.matmul(a, b, plan=plan or None)))
                if mode.startswith("nc"):
                    print(f"  plan {json.dumps(plan_for(v, dt))}: {config_of(a, b, plan or None)}", flush=True)
            if not one:
                cases.append(("torch", torch_case(a, b, dt)))
            measure(f"{dt:5} {s}^3 {threads:2} threads", cases, ref, 2.0 * s ** 3, peak, 0.15, base_label="default", width=46)


if __name__ == "__main__":
    main()
